package admission

import (
	"math"
	"sync/atomic"
	"time"
)

// Bandwidth visibility, from the GPU time a metered tenant measures
// anyway: achieved bandwidth for kernels whose bytes per launch are
// declared, and slowdown (per kernel shape, the running estimate over the
// lowest it has been, averaged over recent launches weighted by GPU time).

// BandwidthWindow is how much of a stream's GPU time "recent" spans: older
// launches' weight decays as exp(-t/BandwidthWindow).
const BandwidthWindow = 100 * time.Millisecond

// bandwidthAccount is a stream's decayed sums (under its meter's lock).
type bandwidthAccount struct {
	// guarded by meter.mu, as a meter's bw (a GateSums' is its caller's).
	weight  float64 // GPU ns of recent launches
	slowSum float64 // their ns x (estimate / lowest estimate)
	byteNs  float64 // GPU ns of recent launches with declared bytes
	bytes   float64 // their bytes
}

// lowest lowers e's best to its current estimate if that is lower, and
// returns the best.
func (e *Estimate) lowest() float64 {
	cur := e.ns.Load()
	for {
		b := e.best.Load()
		if b != 0 && math.Float64frombits(b) <= math.Float64frombits(cur) {
			return math.Float64frombits(b)
		}
		if e.best.CompareAndSwap(b, cur) {
			return math.Float64frombits(cur)
		}
	}
}

// observe folds a completed launch of ns GPU nanoseconds, estimated by est
// (which has just learnt it) and declaring bytes, into a, and its bytes
// into the tenant's total.
func (a *bandwidthAccount) observe(est *Estimate, bytes uint64, ns float64, total *atomic.Uint64) {
	d := math.Exp(-ns / float64(BandwidthWindow))
	a.weight, a.slowSum, a.byteNs, a.bytes = a.weight*d, a.slowSum*d, a.byteNs*d, a.bytes*d
	if best := est.lowest(); best > 0 {
		a.weight += ns
		a.slowSum += ns * est.get() / best
	}
	if bytes > 0 {
		a.byteNs += ns
		a.bytes += float64(bytes)
		total.Add(bytes)
	}
}

// add adds a's sums to s.
func (s *bandwidthAccount) add(a *bandwidthAccount) {
	s.weight += a.weight
	s.slowSum += a.slowSum
	s.byteNs += a.byteNs
	s.bytes += a.bytes
}
