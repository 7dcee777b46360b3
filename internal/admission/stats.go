package admission

import (
	"time"

	"github.com/fcsp-go/fcsp-go/stream"
)

// Stats is the admission's part of a tenant's Stats.
type Stats struct {
	SMLimit, GPUShare float64
	Throttled         uint64
	ThrottleWait      time.Duration
	DoAdmitted        uint64
	DoThrottled       uint64
	DoThrottleWait    time.Duration
	GPUTime           time.Duration
	GPUTimeByClass    map[stream.Class]time.Duration // nil: not metered
	Floored, Bytes    uint64                         // launches admitted at the floor; declared bytes completed
	BytesPerSecond    float64
	Slowdown          float64
}

// GateSums adds up a tenant's gates' figures for Stats: the caller walks
// its streams (under its own lock) and adds each stream's gate
// (Gate.AddTo), with no copy of them; Stats is polled.
type GateSums struct {
	throttled uint64
	wait      time.Duration
	bw        bandwidthAccount
}

// Stats polls the metered streams and adds the sums of the tenant's gates.
func (t *Tenant) Stats(gates *GateSums) Stats {
	ls := t.price.stats(t.dm.Load())
	s := Stats{SMLimit: ls.smLimit, GPUShare: ls.gpuShare,
		DoAdmitted: ls.do.Admitted, DoThrottled: ls.do.Throttled, DoThrottleWait: time.Duration(ls.do.WaitNanos)}
	if t.cfg.Metered {
		_ = t.Poll()
		s.GPUTimeByClass = make(map[stream.Class]time.Duration)
		for cl := range t.gpu {
			if ns := t.gpu[cl].Load(); ns != 0 {
				s.GPUTimeByClass[stream.Class(cl)] = time.Duration(ns)
				s.GPUTime += time.Duration(ns)
			}
		}
	}
	s.Throttled, s.ThrottleWait = s.DoThrottled+gates.throttled, s.DoThrottleWait+gates.wait
	s.Floored, s.Bytes = t.floored.Load(), t.bytes.Load()
	sum := gates.bw
	if sum.weight > 0 {
		s.Slowdown = sum.slowSum / sum.weight
	}
	if sum.byteNs > 0 {
		s.BytesPerSecond = sum.bytes / sum.byteNs * 1e9
	}
	return s
}
