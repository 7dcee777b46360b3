package fcsp

// call runs f as one of the tenant's calls: counted in its life lock, so
// that a Close waits for it rather than letting go what it uses, and
// refused (enter's error) once the tenant closed, stalled or lost its
// device. The primitive of every call of the SDK but the hottest paths
// (a launch, an allocation), which count themselves in and out by hand.
func (c *tenantCore) call(f func() error) error {
	slot, err := c.enter()
	if err != nil {
		return err
	}
	defer c.life.Exit(slot)
	return f()
}

// enter admits a call while the tenant lives; ErrClosed once Close began,
// the pool's *DeviceLostError once the device is lost (bare: the call's
// face names the tenant). The caller passes the slot to c.life.Exit when
// done.
func (c *tenantCore) enter() (uint32, error) {
	slot, ok := c.life.Enter(c.dos.Pinned) // pass: a call from inside a Do (or Capture) on its thread
	if !ok {
		return 0, c.refused()
	}
	if err := c.alive(); err != nil {
		c.life.Exit(slot)
		return 0, err
	}
	return slot, nil
}

// enterWait is enter for a wait on one of the tenant's streams, the handle
// read after it: a Reshape neither holds it back nor waits for it (the old
// layout's streams stay valid until the tenant closes), Close does. The
// caller passes the slot to c.life.ExitWait.
func (c *tenantCore) enterWait() (uint32, error) {
	slot, ok := c.life.EnterWait(c.dos.Pinned)
	if !ok {
		return 0, c.refused()
	}
	if err := c.alive(); err != nil {
		c.life.ExitWait(slot)
		return 0, err
	}
	return slot, nil
}

// refused is why the life lock turned a call away.
func (c *tenantCore) refused() error {
	if lost := c.pool.fault.Err(); lost != nil && !c.closed.Load() {
		return lost // a Reset is under way
	}
	if r := c.stall.Load(); r != nil {
		return r.err()
	}
	return ErrClosed
}

// alive is nil while the tenant is open and its device not lost: checked
// again once counted in, since Close and a loss may have begun meanwhile.
func (c *tenantCore) alive() error {
	if c.closed.Load() {
		return ErrClosed
	}
	if lost := c.pool.fault.Err(); lost != nil {
		return lost
	}
	return nil
}
