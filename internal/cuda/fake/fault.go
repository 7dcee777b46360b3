package fake

import "github.com/fcsp-go/fcsp-go/internal/cuda"

// Sticky errors, as the H200 showed them: after a kernel on one green
// context wrote to an illegal address, a neighbour green context of the same
// process got CUDA_ERROR_ILLEGAL_ADDRESS on its next launch, synchronisation
// and cuMemAlloc, and no green context could be made. The fake models the
// fault domain as the device within the process: a fault poisons the primary
// context and every green context of the device, and every call that names
// one of them (or a stream or event of one) answers the same code.
// Destroying a green context is still allowed, so that a recovery can clean
// up before it resets.
//
// By default the fault outlives PrimaryCtxReset, as on the H200: the reset
// runs, but the next cuDevicePrimaryCtxRetain answers the sticky code (the
// CUDA documentation: the process must be terminated and relaunched to use
// CUDA again). SetResettableFaults(true) models a driver whose reset clears
// the fault, for tests of the in-process recovery path.

// SetResettableFaults chooses whether PrimaryCtxReset clears a sticky fault
// (true) or leaves the device poisoned until the process ends (false, the
// default, as the H200 does).
func (d *Driver) SetResettableFaults(on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.resettable = on
}

// InjectFault poisons device dev with the sticky code r, as a faulting
// kernel would.
func (d *Driver) InjectFault(dev cuda.Device, r cuda.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.poison(dev, r)
}

// Sticky is the sticky error device dev is poisoned with (Success if none).
func (d *Driver) Sticky(dev cuda.Device) cuda.Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sticky[dev]
}

// poison records the first sticky error of dev; the caller holds d.mu.
func (d *Driver) poison(dev cuda.Device, r cuda.Result) {
	if d.sticky == nil {
		d.sticky = map[cuda.Device]cuda.Result{}
	}
	if d.sticky[dev] == cuda.Success {
		d.sticky[dev] = r
	}
}

// poisoned answers the sticky code of dev for op, or nil; the caller holds
// d.mu.
func (d *Driver) poisoned(op string, dev cuda.Device) error {
	if r := d.sticky[dev]; r != cuda.Success {
		return cuda.Check(op, r)
	}
	return nil
}

// devOf is the device a call runs on: its context's, or where the context
// is zero (unscoped), its stream's. ok is false where neither names one.
func (d *Driver) devOf(c cuda.Context, s cuda.Stream) (cuda.Device, bool) {
	if c == 0 {
		if st := d.streams[s]; st != nil {
			c = st.ctx
		}
	}
	if x := d.contexts[c]; x != nil {
		return x.dev, true
	}
	return 0, false
}

// poisonedAt is poisoned for a call given context c and stream s.
func (d *Driver) poisonedAt(op string, c cuda.Context, s cuda.Stream) error {
	if dev, ok := d.devOf(c, s); ok {
		return d.poisoned(op, dev)
	}
	return nil
}

// PrimaryCtxReset is cuDevicePrimaryCtxReset_v2: every allocation, pool,
// stream, event and module of the device dies, green contexts built over it
// with them, and, with SetResettableFaults(true), the sticky error is
// cleared; by default it stays, as on the real driver. The primary context
// keeps its handle and retain count.
func (d *Driver) PrimaryCtxReset(dev cuda.Device) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	const op = "cuDevicePrimaryCtxReset_v2"
	if err := d.enter(op); err != nil {
		return err
	}
	if err := d.device(op, dev); err != nil {
		return err
	}
	onDev := func(c cuda.Context) bool { x := d.contexts[c]; return x != nil && x.dev == dev }
	for _, g := range d.greens {
		if !g.destroyed && onDev(g.ctx) {
			g.destroyed = true
			d.contexts[g.ctx].destroyed = true
		}
	}
	for h, st := range d.streams {
		if onDev(st.ctx) {
			d.dropQueue(st) // its work dies with it, a stalled kernel's too
			delete(d.streams, h)
		}
	}
	if dev == 0 {
		d.dropQueue(d.null)
		d.null = &streamInfo{}
	}
	for h, e := range d.events {
		if onDev(e.ctx) {
			delete(d.events, h)
		}
	}
	for h, m := range d.modules {
		if onDev(m.ctx) {
			delete(d.modules, h)
			for fh, f := range d.funcs {
				if f.mod == m {
					delete(d.funcs, fh)
				}
			}
		}
	}
	for h, p := range d.pools {
		if onDev(p.ctx) {
			p.destroy(&d.mem)
			delete(d.pools, h)
		}
	}
	// Plain allocations do not record their context; the fake's devices
	// share one memory, so a reset of a one-device fake frees them all.
	d.mem.freeUnplaced()
	if d.resettable {
		delete(d.sticky, dev)
	}
	d.resets++
	return nil
}

// Resets counts PrimaryCtxReset calls that succeeded.
func (d *Driver) Resets() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.resets
}
