package fcsp

import (
	"math"
	"time"
)

// Bandwidth visibility. A partition's kernels share the device's memory
// bandwidth with every other partition's, so a tenant may run slower than
// its SMs promise. Two figures show it, both from the GPU time a metered
// tenant measures anyway (gputime.go):
//
//   - achieved bandwidth, for kernels whose bytes per launch are declared
//     (Function.SetBytesMoved): declared bytes / measured GPU time;
//   - slowdown, with no declaration: per kernel shape, the running estimate
//     of its duration over the lowest that estimate has been, averaged over
//     the tenant's recent launches weighted by their GPU time.

// bandwidthWindow is how much of a stream's GPU time "recent" spans: older
// launches' weight decays as exp(-t/bandwidthWindow).
const bandwidthWindow = 100 * time.Millisecond

// BandwidthStats is a tenant's memory-bandwidth figures (Stats.Bandwidth).
// The recent figures cover the tenant's last ~100 ms of GPU time on each
// stream, and only launches whose events have completed; they are 0 for a
// tenant that is not metered (WithGPUMetering, WithGPUShare,
// WithPriority(LatencyCritical) or WithBandwidthFloor meter it) or has no
// such launch yet.
type BandwidthStats struct {
	Priority Priority // WithPriority
	Floor    float64  // WithBandwidthFloor; 0: none
	// FlooredLaunches counts launches admitted at the floor (while a
	// LatencyCritical tenant of the pool had work in flight).
	FlooredLaunches uint64

	// BytesMoved is the declared bytes (Function.SetBytesMoved) of the
	// tenant's completed launches.
	BytesMoved uint64
	// BytesPerSecond is the achieved bandwidth of the tenant's recent
	// launches with declared bytes: their bytes over their GPU time. 0:
	// none declared.
	BytesPerSecond float64
	// Slowdown is how much slower the tenant's kernels ran recently than
	// they ever have: for each launch, its kernel shape's running estimate
	// over the lowest that estimate has been, weighted by the launch's GPU
	// time. 1 means as fast as ever seen, 1.5 half as fast again. It is
	// relative to the best this process has seen, not to the kernel
	// alone on the device: a tenant that has only ever run beside a busy
	// neighbour reads about 1. 0: nothing measured.
	Slowdown float64
}

// SetBytesMoved declares how many bytes of device memory one launch of f
// reads and writes (for a = b + s*c over n floats, 12n), so that a metered
// tenant reports its achieved bandwidth (Stats.Bandwidth.BytesPerSecond).
// It applies to launches made after the call, whatever their shape; 0
// stops the declaration.
func (f *Function) SetBytesMoved(n uint64) { f.bytes.Store(n) }

// BytesMoved is what SetBytesMoved declared.
func (f *Function) BytesMoved() uint64 { return f.bytes.Load() }

// bandwidthAccount is a stream's decayed sums (under its meter's lock).
type bandwidthAccount struct {
	weight  float64 // GPU ns of recent launches
	slowSum float64 // their ns x (estimate / lowest estimate)
	byteNs  float64 // GPU ns of recent launches with declared bytes
	bytes   float64 // their bytes
}

// lowest lowers e's best to its current estimate if that is lower, and
// returns the best.
func (e *estimate) lowest() float64 {
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

// observe folds a completed launch of ns GPU nanoseconds into s's
// bandwidth account. Called with s.meter.mu held, after p.est.add.
func (s *Stream) observe(p *timedLaunch, ns float64) {
	a := &s.meter.bw
	d := math.Exp(-ns / float64(bandwidthWindow))
	a.weight, a.slowSum, a.byteNs, a.bytes = a.weight*d, a.slowSum*d, a.byteNs*d, a.bytes*d
	if best := p.est.lowest(); best > 0 {
		a.weight += ns
		a.slowSum += ns * p.est.get() / best
	}
	if p.bytes > 0 {
		a.byteNs += ns
		a.bytes += float64(p.bytes)
		s.t.prio.bytes.Add(p.bytes)
	}
}

// bandwidthStats sums the streams' accounts. Called with c.mu held, after
// gpuTimes polled them.
func (c *tenantCore) bandwidthStats() BandwidthStats {
	bs := BandwidthStats{Floor: c.prio.floor, FlooredLaunches: c.prio.floored.Load(), BytesMoved: c.prio.bytes.Load()}
	if c.prio.latency {
		bs.Priority = LatencyCritical
	}
	var sum bandwidthAccount
	for _, st := range c.streams {
		if m := st.meter; m != nil {
			m.mu.Lock()
			sum.weight += m.bw.weight
			sum.slowSum += m.bw.slowSum
			sum.byteNs += m.bw.byteNs
			sum.bytes += m.bw.bytes
			m.mu.Unlock()
		}
	}
	if sum.weight > 0 {
		bs.Slowdown = sum.slowSum / sum.weight
	}
	if sum.byteNs > 0 {
		bs.BytesPerSecond = sum.bytes / sum.byteNs * 1e9
	}
	return bs
}
