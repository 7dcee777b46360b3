package fcsp

// enter admits a call while the tenant lives; ErrClosed once Close began,
// the pool's *DeviceLostError once the device is lost (bare: the call's
// face names the tenant). The caller passes the slot to c.life.Exit when
// done.
func (c *tenantCore) enter() (uint32, error) {
	slot, ok := c.life.Enter(c.dos.Pinned) // pass: a call from inside a Do (or Capture) on its thread
	if !ok {
		if lost := c.pool.fault.Err(); lost != nil && !c.closed.Load() {
			return 0, lost // a Reset is under way
		}
		return 0, ErrClosed
	}
	if c.closed.Load() {
		c.life.Exit(slot)
		return 0, ErrClosed
	}
	if lost := c.pool.fault.Err(); lost != nil {
		c.life.Exit(slot)
		return 0, lost
	}
	return slot, nil
}
