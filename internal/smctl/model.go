package smctl

import (
	"slices"
	"time"
)

// What a request needs at each size, learnt from the samples (issue 56:
// "a burst of sixteen requests asks for its size on arrival").
//
// At each size the model keeps two figures from the samples taken there:
//
//   - need: the P99 times the SMs over the requests that shared them (the
//     sample's Load): the SM-time a request took at the tail when the SMs
//     were shared. With n requests in flight on sms SMs a request then
//     takes need x n / sms: the SMs are shared n ways.
//   - alone: the P99 of requests that ran alone (Load at most aloneLoad),
//     the least a request takes however many SMs it is given.
//
// The P99 predicted for n requests on sms SMs is the larger of the two.
// A size not measured yet borrows the figures of the nearest one that is,
// need scaled by the SMs as above: a request's throughput taken to grow
// as fast as its SMs, which it does not (on an H100, m=64 GEMMs at 48, 40
// and 32 SMs took 300, 345 and 380 us), so the borrowed prediction is
// pessimistic going down: the trim (smctl.go), which tries a step and
// backs off, finds what it misses. With no shared load measured anywhere,
// need is taken from alone (one request's P99 times the SMs it had): a
// request alone does not fill its SMs, so that too errs toward more SMs.
//
// A sample is learnt from when it is of enough requests (obsRequests) or
// shows a tail over target (a size that missed is learnt from at once, or
// the next burst would be sent to it again). Each figure is a running
// average (ewma).
type model struct {
	min, unit int
	max       int
	at        []sizeFigures // by (sms - min) / unit
	// Under a relative target: the P99 at Max under the heaviest load
	// measured there, and that load; 0: none yet. It is the median of
	// the last refSamples such samples, once refFew are in: one sample's
	// P99 may be a cold start's (on an H100, run G2: a warm-up's 3.6 ms
	// against the 0.45-0.57 ms of a burst at 48 SMs made a target of 4.3
	// ms, and the controller trimmed the bursts to 16 SMs).
	ref     time.Duration
	refLoad float64
	refs    [refSamples]time.Duration
	nrefs   int
}

// refSamples and refFew: the reference of a relative target is the median
// of the last refSamples P99s at Max under about the heaviest load, once
// refFew are in.
const (
	refSamples = 5
	refFew     = 3
)

// addRef adds a P99 at Max to the reference's samples and takes their
// median as the reference, once there are enough.
func (m *model) addRef(p time.Duration) {
	m.refs[m.nrefs%refSamples] = p
	m.nrefs++
	n := min(m.nrefs, refSamples)
	if n < refFew {
		m.ref = 0
		return
	}
	s := m.refs
	slices.Sort(s[:n])
	m.ref = s[n/2]
}

type sizeFigures struct {
	need  float64 // ns x SMs; 0: not measured
	alone float64 // ns; 0: not measured
}

// obsRequests is the fewest requests a sample's P99 is learnt from (a
// tail over target aside); aloneLoad the most Load of requests that ran
// alone; ewma the weight of a new figure.
const (
	obsRequests = 16
	aloneLoad   = 1.5
	ewma        = 0.5
)

func newModel(cfg Config) model {
	return model{min: cfg.Min, unit: cfg.Unit, max: cfg.Max, at: make([]sizeFigures, (cfg.Max-cfg.Min)/cfg.Unit+1)}
}

// known reports whether anything is measured.
func (m *model) known() bool {
	for _, f := range m.at {
		if f.need > 0 || f.alone > 0 {
			return true
		}
	}
	return false
}

func average(old, v float64) float64 {
	if old == 0 {
		return v
	}
	return old*(1-ewma) + v*ewma
}

// observe learns from s, if trusted (see model).
func (m *model) observe(s Sample, trusted bool) {
	if !trusted || s.P99 <= 0 || s.SMs < m.min || s.SMs > m.max || (s.SMs-m.min)%m.unit != 0 {
		return
	}
	load := s.Load
	if load == 0 {
		load = float64(s.InFlight)
	}
	load = max(load, 1)
	f := &m.at[(s.SMs-m.min)/m.unit]
	p := float64(s.P99)
	if load <= aloneLoad {
		f.alone = average(f.alone, p)
	} else {
		f.need = average(f.need, p*float64(s.SMs)/load)
	}
	// The reference of a relative target: the P99 at Max under about the
	// heaviest load seen there; a much heavier one replaces it.
	if s.SMs == m.max && load > aloneLoad && load >= refNear*m.refLoad {
		if load > m.refLoad/refNear {
			m.nrefs = 0 // a much heavier load: its samples start again
		}
		m.refLoad = max(m.refLoad, load)
		m.addRef(s.P99)
	}
}

// refNear is how near the heaviest load at Max a load must be for its P99
// to count in the reference of a relative target.
const refNear = 0.75

// predict is the P99 of n requests in flight on sms SMs; 0: nothing
// measured.
func (m *model) predict(n, sms int) time.Duration {
	need, alone := m.figures(sms)
	if need == 0 && alone == 0 {
		return 0
	}
	return time.Duration(max(need*float64(n)/float64(sms), alone))
}

// figures is need and alone at sms, or borrowed from the nearest size
// measured (see model); need taken from alone where no shared load was
// measured anywhere.
func (m *model) figures(sms int) (need, alone float64) {
	i := (sms - m.min) / m.unit
	nearest := func(get func(sizeFigures) float64) (float64, int) {
		for d := 0; d < len(m.at); d++ {
			for _, j := range []int{i - d, i + d} {
				if j >= 0 && j < len(m.at) && get(m.at[j]) > 0 {
					return get(m.at[j]), m.min + j*m.unit
				}
			}
		}
		return 0, 0
	}
	need, _ = nearest(func(f sizeFigures) float64 { return f.need })
	alone, at := nearest(func(f sizeFigures) float64 { return f.alone })
	if need == 0 && alone > 0 {
		need = alone * float64(at)
	}
	return need, alone
}
