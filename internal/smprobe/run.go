package smprobe

import (
	"context"
	"errors"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/devmem"
	"github.com/fcsp-go/fcsp-go/internal/errs"
)

// Stream is a tenant's stream as the probe runs on it: as the tenant's
// memory engine sees it, and the calls the probe makes on it, each
// counted in the tenant's life lock as the tenant's own are.
type Stream interface {
	devmem.Stream
	// Launch queues fn on the stream as grid x block, admitted as
	// nothing: a health check is not the tenant's work.
	Launch(fn cuda.Function, grid, block cuda.Dim3, args *cuda.Args) error
	// Wait waits for the work queued on the stream, as the tenant's
	// Stream.Synchronize does.
	Wait() error
}

// Run runs the probe, fn (Kernel.Function's), on s, a stream of a tenant
// whose memory engine is mem, on a device of sms SMs, and returns the SMs
// its blocks ran on (SMs): its output, the tenant's memory, is filled
// with Unwritten, the kernel queued and waited for, the output read back
// and freed, whatever failed.
func Run(mem devmem.Allocator, s Stream, fn cuda.Function, sms int) ([]int, error) {
	blocks := Blocks(sms)
	buf, err := devmem.Alloc(mem, s, uint64(4*blocks))
	if err != nil {
		return nil, err
	}
	err = mem.Ops().MemsetD32(s, buf, Unwritten, uint64(blocks))
	if err == nil {
		var a cuda.Args
		a.Ptr(buf).Uint64(Cycles)
		err = s.Launch(fn, cuda.Dim3{X: uint32(blocks), Y: 1, Z: 1}, cuda.Dim3{X: 32, Y: 1, Z: 1}, &a)
	}
	if err == nil {
		err = s.Wait()
	}
	out := make([]byte, 4*blocks)
	if err == nil {
		err = mem.Ops().CopyFromDevice(out, buf)
	}
	if err = errors.Join(err, devmem.Free(mem, s, buf)); err != nil {
		return nil, err
	}
	return SMs(out), nil
}

// Tenant is a tenant as a survey of the pool's sees it: fcsp's tenant core
// implements it (its host, a conversion of the core's pointer).
type Tenant interface {
	// Owner is the tenant as the breach rule sees it.
	Owner() Owner
	// Probe runs the probe, fn, on a new stream of the tenant's (Run).
	Probe(fn cuda.Function) ([]int, error)
	// Fail names err as the tenant's call op's (fcsp.TenantError).
	Fail(op string, err error) error
}

// Survey runs the probe, fn, on each tenant (Tenant.Probe) and reports the
// SMs each one's blocks ran on, by the tenant's name, and the breaches
// among them (Breaches, with name). A tenant closed meanwhile
// (errs.ErrClosed) is left out; the others' errors are joined, each named
// as the tenant's call op's. If ctx ends first, Survey returns what it
// found so far, no breaches, and ctx's error.
func Survey(ctx context.Context, fn cuda.Function, tenants []Tenant, op string, name func(string) string) (map[string][]int, []string, error) {
	found := make(map[string][]int, len(tenants))
	var failed []error
	for _, t := range tenants {
		if err := ctx.Err(); err != nil {
			return found, nil, err
		}
		sms, err := t.Probe(fn)
		if errors.Is(err, errs.ErrClosed) {
			continue // closed meanwhile
		}
		if err != nil {
			failed = append(failed, t.Fail(op, err))
			continue
		}
		found[t.Owner().Name] = sms
	}
	owners := make([]Owner, len(tenants))
	for i, t := range tenants {
		owners[i] = t.Owner()
	}
	return found, Breaches(owners, found, name), errors.Join(failed...)
}
