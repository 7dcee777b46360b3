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
	fn, err := p.probe.Function(p.dev)
	if err != nil {
		return SMReport{}, err
	}
	cores := p.tenants.List(nil)
	tenants := make([]smprobe.Tenant, len(cores))
	for i, c := range cores {
		tenants[i] = (*host)(c)
	}
	sms, breaches, err := smprobe.Survey(ctx, fn, tenants, "Pool.ProbeSMs", tenantName)
	return SMReport{SMs: sms, Breaches: breaches}, err
}

// The tenant as the probe's survey sees it (smprobe.Tenant) is host too:
// its Fail (do.go), and these.
func (h *host) Owner() smprobe.Owner {
	return smprobe.Owner{Name: h.name, Partitioned: h.place.Partitioned(), Rest: place.Rest(h.place.Placement)}
}

// Probe runs the probe (smprobe.Run) on a new stream of the tenant's,
// closed after.
func (h *host) Probe(fn cuda.Function) ([]int, error) {
	c := (*tenantCore)(h)
	sh, err := c.addStream(func() (*streamCore, error) { return c.newStream(ClassDefault, false) })
	if err != nil {
		return nil, err
	}
	s, err := sh.acquire()
	if err != nil {
		return nil, err
	}
	sms, err := smprobe.Run(c.mem, probeStream{(*memStream)(s)}, fn, c.pool.info.SMs)
	if err = errors.Join(err, s.close()); err != nil {
		return nil, err
	}
	return sms, nil
}

// probeStream is the probe's stream (smprobe.Stream): the memory engine's
// view of it, and the calls the probe makes on it.
type probeStream struct{ *memStream }

func (s probeStream) Wait() error { return (*streamCore)(s.memStream).wait(nil) }

// Launch queues the probe counted in the tenant's life lock and admitted
// as nothing: a health check is not the tenant's work.
func (s probeStream) Launch(fn cuda.Function, grid, block cuda.Dim3, args *cuda.Args) error {
	sc := (*streamCore)(s.memStream)
	return sc.t.call(func() error {
		return sc.Queue(&modules.Kernel{H: fn, Name: smprobe.Name}, grid, block, 0, args)
	})
}
