package fcsp

import (
	"context"
	"errors"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/modules"
	"github.com/fcsp-go/fcsp-go/internal/place"
	"github.com/fcsp-go/fcsp-go/internal/smprobe"
)

// SMReport is where each tenant's work ran, by a probe kernel whose blocks
// record the SM they ran on (%smid): what Pool.ProbeSMs found.
type SMReport struct {
	// SMs lists, for each tenant, the SMs the probe's blocks ran on when
	// queued on a stream of the tenant's: its partition's, or for an
	// unpartitioned tenant the SMs no partition holds.
	SMs map[string][]int
	// Breaches says, for each tenant whose blocks ran on SMs of another
	// tenant's partition, whose and how many. Empty while the pool
	// confines every tenant. Unpartitioned tenants share SMs with each
	// other, and with the partition of the rest (WithRestOfSMs) where no
	// SM is free: neither is a breach.
	Breaches []string
}

// Confined reports whether no tenant ran on another's partition.
func (r SMReport) Confined() bool { return len(r.Breaches) == 0 }

// ProbeSMs runs a probe kernel on a new stream of each tenant (a
// microsecond of work per SM, 4 blocks per SM of the device) and reports
// the SMs each one's blocks ran on, and any that ran on SMs of another
// tenant's partition: a health check that the pool's confinement holds
// on this driver, which a server may run now and then. What the SDK does
// not see, it cannot confine: work a library queues on the primary context
// (its own default stream) rather than on a tenant's stream runs on every
// SM, the partitions' included (docs/CONTEXTS.md); this probe does not
// find it. The first call loads the kernel, which waits for the device.
func (p *Pool) ProbeSMs(ctx context.Context) (SMReport, error) {
	if ctx == nil {
		return SMReport{}, errNilContext
	}
	h, err := p.probe.Function(p.dev)
	if err != nil {
		return SMReport{}, err
	}
	fn := &Function{k: modules.Kernel{H: h, Name: smprobe.Name}}
	cores := p.tenants.List(nil)
	r := SMReport{SMs: make(map[string][]int, len(cores))}
	var errs []error
	for _, c := range cores {
		if err := ctx.Err(); err != nil {
			return r, err
		}
		sms, err := c.probeSMs(fn)
		if errors.Is(err, ErrClosed) {
			continue // closed meanwhile
		}
		if err != nil {
			errs = append(errs, c.fail("Pool.ProbeSMs", err))
			continue
		}
		r.SMs[c.name] = sms
	}
	owners := make([]smprobe.Owner, len(cores))
	for i, c := range cores {
		owners[i] = smprobe.Owner{Name: c.name, Partitioned: c.place.Partitioned(), Rest: place.Rest(c.place.Placement)}
	}
	r.Breaches = smprobe.Breaches(owners, r.SMs, tenantName)
	return r, errors.Join(errs...)
}

// probeSMs runs the probe on a new stream of the tenant's.
func (c *tenantCore) probeSMs(fn *Function) ([]int, error) {
	h, err := c.addStream(func() (*streamCore, error) { return c.newStream(ClassDefault, false) })
	if err != nil {
		return nil, err
	}
	s, err := h.acquire()
	if err != nil {
		return nil, err
	}
	blocks := smprobe.Blocks(c.pool.info.SMs)
	buf, err := c.alloc(s, uint64(4*blocks))
	if err != nil {
		return nil, errors.Join(err, s.close())
	}
	err = c.memOps.MemsetD32((*memStream)(s), cuda.DevicePtr(buf), smprobe.Unwritten, uint64(blocks))
	if err == nil {
		var a Args
		a.Ptr(buf).Uint64(smprobe.Cycles)
		err = c.launchProbe(s, fn, blocks, &a)
	}
	if err == nil {
		err = s.wait(nil)
	}
	out := make([]byte, 4*blocks)
	if err == nil {
		err = c.memOps.CopyFromDevice(out, cuda.DevicePtr(buf))
	}
	err = errors.Join(err, c.free(s, buf))
	if err = errors.Join(err, s.close()); err != nil {
		return nil, err
	}
	return smprobe.SMs(out), nil
}

// launchProbe queues the probe on s, counted in the tenant's life lock and
// admitted as nothing: a health check is not the tenant's work.
func (c *tenantCore) launchProbe(s *streamCore, fn *Function, blocks int, a *Args) error {
	return c.call(func() error {
		return s.Queue(&fn.k, cuda.Dim3{X: uint32(blocks), Y: 1, Z: 1}, cuda.Dim3{X: 32, Y: 1, Z: 1}, 0, &a.a)
	})
}
