package admission

// Floor pricing (WithBandwidthFloor): while a LatencyCritical tenant of
// the pool has work in flight (latency.go), work of a floored tenant is
// charged its predicted GPU time / floor in all, so it moves less memory
// meanwhile; work waiting at the floor when they all go idle is priced
// again, at its full share (floorWait, wait.go). fcsp/priority.go says
// why.

// floored is the pricer of a GPU share with a bandwidth floor: a floor
// acts on a GPU-time bucket, and NewTenant gives one only to a GPU share.
type floored struct {
	gpuTime
	floor float64
	pool  *Pool
}

// price is the share's price and, while a latency tenant is busy, the
// floor's surcharge.
func (f floored) price(j job) (measured, fixed, floor float64) {
	measured, fixed, _ = f.gpuTime.price(j)
	return measured, fixed, f.surcharge(measured, j)
}

// surcharge is what j, costing base tokens at the tenant's share (0 at
// share 1), costs beyond that while a latency tenant is busy: 0 while none
// is. The prediction is asked for only then.
func (f floored) surcharge(base float64, j job) float64 {
	pp := f.pool
	if pp.busy.Load() == 0 {
		return 0
	}
	pp.Refresh()
	if pp.busy.Load() == 0 {
		return 0
	}
	full := base
	if full == 0 { // share 1 is admitted free: price it as a share below 1 is
		full = f.predicted(j)
	}
	return full/f.floor - base
}

// freeDo is false: at share 1 a Do is still charged at the floor.
func (floored) freeDo() bool { return false }
