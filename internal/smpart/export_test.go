package smpart

// SetMaxIdleGreens sets the bound of kept green contexts per device, and
// returns the undo.
func SetMaxIdleGreens(n int) func() {
	old := maxIdleGreens
	maxIdleGreens = n
	return func() { maxIdleGreens = old }
}
