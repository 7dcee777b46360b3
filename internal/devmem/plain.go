package devmem

import (
	"errors"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/memtrack"
)

// plain allocates with cuMemAlloc and frees with cuMemFree. Device memory is
// not partitioned by SMs: a green context shares its primary context's
// memory, and the primary context may be current on any thread, so plain
// allocations take no partition's lock and ignore the stream.
type plain struct {
	cfg Config
}

// NewPlain is the engine of a tenant made WithoutMemoryPool.
func NewPlain(cfg Config) Allocator { return &plain{cfg: cfg} }

func (e *plain) Alloc(_ Stream, n uint64) (cuda.DevicePtr, error) {
	r, err := e.cfg.reserve(n)
	if err != nil {
		return 0, err
	}
	p, err := e.alloc(n)
	if err != nil {
		r.Cancel()
		return 0, err
	}
	if err := r.Commit(uint64(p)); err != nil {
		// Cannot happen for a pointer the driver just returned; the
		// reservation is cancelled, give the memory back too.
		_ = e.cfg.Driver.MemFree(e.cfg.Device.Primary(), p)
		return 0, err
	}
	return p, nil
}

// alloc calls cuMemAlloc; when the device is out of memory, the pooled
// tenants give back what they cache and it tries again.
func (e *plain) alloc(n uint64) (cuda.DevicePtr, error) {
	p, err := e.cfg.Driver.MemAlloc(e.cfg.Device.Primary(), n)
	if errors.Is(err, cuda.ErrorOutOfMemory) && e.cfg.Peers.trimOthers(nil) > 0 {
		p, err = e.cfg.Driver.MemAlloc(e.cfg.Device.Primary(), n)
	}
	if err == nil {
		e.cfg.Info.Changed()
	}
	return p, err
}

func (e *plain) Free(_ Stream, p cuda.DevicePtr) error {
	r, err := e.cfg.Account.StartRelease(uint64(p))
	if err != nil {
		return err // memtrack's error names the pointer
	}
	if err := e.cfg.Driver.MemFree(e.cfg.Device.Primary(), p); err != nil {
		// The driver kept it (or a Close, waiting for this call, will free
		// it): it stays recorded, its bytes never stopped counting.
		return errors.Join(err, r.Cancel())
	}
	r.Commit()
	e.cfg.Info.Changed()
	return nil
}

func (e *plain) Flush(Stream) error        { return nil }
func (e *plain) Trim() error               { return nil }
func (e *plain) Reserved() (uint64, error) { return 0, nil }
func (e *plain) Charged() uint64           { return e.cfg.Account.Used() }

func (e *plain) Ops() *Config { return &e.cfg }

func (e *plain) Close(_ cuda.Context, leaks []memtrack.Allocation) error {
	var errs []error
	for _, a := range leaks {
		errs = append(errs, e.cfg.Driver.MemFree(e.cfg.Device.Primary(), cuda.DevicePtr(a.Ptr)))
	}
	if len(leaks) > 0 {
		e.cfg.Info.Changed()
	}
	return errors.Join(errs...)
}
