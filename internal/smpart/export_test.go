package smpart

// SetMaxIdleGreens sets the bound of kept green contexts per device, and
// returns the undo.
func SetMaxIdleGreens(n int) func() {
	old := maxIdleGreens
	maxIdleGreens = n
	return func() { maxIdleGreens = old }
}

// TryLockForTest reports whether the partition's lock is free (taking and
// letting it go at once).
func (p *Partition) TryLockForTest() bool {
	if !p.mu.TryLock() {
		return false
	}
	p.mu.Unlock()
	return true
}
