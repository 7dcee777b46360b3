package tokenbucket

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// The bucket's state is one int64: the theoretical arrival time (TAT) in
// nanoseconds since the bucket was created, shifted left by genBits, with a
// rate generation in the low bits. TAT is the instant at which the bucket
// would be full again; TAT ≤ now means full, and TAT − now is the backlog
// (burst − tokens, in time units).
//
// The generation ties the TAT to the rate it was computed with. SetRate
// publishes new parameters first and then rescales the TAT to the new rate;
// an acquirer that sees a TAT of the previous generation performs (helps
// with) that rescale before charging, so no acquire ever mixes the old
// backlog with the new rate or the reverse. A stale read would need 2^genBits
// SetRate calls to complete between two adjacent atomic loads.
const (
	genBits = 4
	genMask = 1<<genBits - 1

	// maxSpan caps any charge, backlog or debt so that TAT<<genBits cannot
	// overflow: 2^56 ns is about 2.3 years, against 2^59 ns (18 years) of
	// room for the bucket's own age.
	maxSpan = 1 << 56
)

// epoch anchors the default clock. time.Since on a Time carrying a monotonic
// reading reads only the runtime's monotonic clock, which is cheap and
// immune to wall-clock steps.
var epoch = time.Now()

func monotonic() int64 { return int64(time.Since(epoch)) }

// params are immutable once published; SetRate replaces the pointer.
type params struct {
	rate       float64 // tokens per second
	burst      float64 // tokens
	nsPerToken float64
	tau        int64 // floor(burst*nsPerToken): the largest backlog allowed
	limit      int64 // tau + the debt allowed: no charge leaves a backlog beyond it
	gen        int64
	// The generation and token interval this one replaced, so that an
	// acquirer can finish a rescale that SetRate has started.
	prevGen        int64
	prevNsPerToken float64
	prevBurst      float64
	// scale multiplies the tokens in hand (not debt) on the move from the
	// previous generation: 1 for SetRate, new/old limit for SetSMLimit.
	scale float64

	// For tokens taken under these parameters and given back under later
	// ones (see carry): the parameters that replaced these (nil while
	// they are the bucket's), the change from the ones these replaced
	// (set by the rescale that made it), and how many changes up to this
	// one scaled the tokens in hand or resized the bucket. The link runs
	// forward: the bucket holds only its current parameters, and what
	// holds a charge (a Reservation, a Mark, a lease) holds the parameters
	// it was taken under and every change since, which a give-back is
	// carried through; older parameters no charge holds are collected.
	next   atomic.Pointer[params]
	change atomic.Pointer[change]
	scales int64
}

// change records one move of a bucket to new parameters: the backlog it
// found, and the tokens taken before it that have been given back since.
// Giving g back then gains what giving it back just before the change
// would have: rescaled(backlog-given) - rescaled(backlog-given-g), in the
// new parameters' tokens. Summed over any order of give-backs that is
// rescaled(backlog) - rescaled(backlog-total), so they add up to no more
// than the change would have left in the bucket, and a give-back cannot
// dodge the change's scaling (issue 28 #8).
type change struct {
	backlog float64       // tokens of the previous parameters
	given   atomic.Uint64 // float64 bits, tokens of the previous parameters
}

// charge converts n tokens to nanoseconds, rounding up so that rounding can
// only ever under-admit.
func (p *params) charge(n float64) int64 {
	// clampSpan(math.Ceil(v)) without math.Ceil's call: it is on every
	// launch (issue 19). n is finite and > 0 here, so v is not NaN.
	v := n * p.nsPerToken
	if v >= maxSpan {
		return maxSpan
	}
	if v < 1 {
		return 1
	}
	i := int64(v)
	if float64(i) < v {
		i++
	}
	return i
}

func clampSpan(ns float64) int64 {
	if ns >= maxSpan {
		return maxSpan
	}
	if ns < 1 {
		return 1
	}
	return int64(ns)
}

// Bucket is a lock-free token bucket (GCRA). The zero value is not usable;
// create one with NewBucket. All methods are safe for concurrent use.
//
// Token counts are float64 and need not be whole. Time is kept in whole
// nanoseconds; each charge is rounded up to the next nanosecond, so a bucket
// whose token interval (1/rate) is far below a nanosecond admits slightly
// less than its rate. Counts that are zero or negative take nothing and
// succeed; NaN and ±Inf are refused.
//
// A count larger than the burst can never fit, so it is admitted only when
// the bucket is full. Debt is bounded: no charge leaves the bucket more than
// its debt bound (WithMaxDebt; default one burst) past empty. What an
// oversized count costs beyond that is owed and charged over time, topping
// the backlog up to the bound as it drains, so the long-run rate stays exact
// for any count while the debt at any instant stays bounded. Wait (which
// reserves in arrival order) never starves an oversized request. TryAcquire
// of an oversized count can starve if other callers keep the bucket from
// filling; use Wait when progress must be guaranteed.
type Bucket struct {
	state  atomic.Int64 // TAT<<genBits | gen
	owed   atomic.Int64 // ns charged over time: moved into the TAT as the bound allows
	params atomic.Pointer[params]
	clock  func() int64
	start  int64        // clock() at creation; the TAT is relative to it
	debt   int64        // ns of debt allowed past empty; <0: one burst
	mu     sync.Mutex   // serialises SetRate only; acquires never take it
	keep   atomic.Int64 // refunds leave the TAT at least here (a live lease's end; see lease)
}

// Option configures a Bucket.
type Option func(*options)

type options struct {
	clock func() int64
	debt  time.Duration
	set   bool
}

// WithMaxDebt bounds how far past empty one charge may leave the bucket
// (default: one burst's worth of time). Zero allows no debt at all: an
// oversized count is then charged one burst at a time. Negative selects
// the default.
func WithMaxDebt(d time.Duration) Option {
	return func(o *options) { o.debt, o.set = d, d >= 0 }
}

// WithClock makes the bucket read time from clock, which must return
// monotonic nanoseconds (any origin). Tests use it to drive a bucket
// deterministically. A nil clock selects the default monotonic clock.
func WithClock(clock func() int64) Option {
	return func(o *options) { o.clock = clock }
}

// NewBucket returns a full bucket that refills rate tokens per second up to
// burst tokens.
func NewBucket(rate, burst float64, opts ...Option) (*Bucket, error) {
	if err := checkRate("rate", rate); err != nil {
		return nil, err
	}
	if !(burst > 0) || math.IsInf(burst, 0) {
		return nil, invalid("burst", burst, "a finite number of tokens > 0")
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.clock == nil {
		o.clock = monotonic
	}
	b := &Bucket{clock: o.clock, debt: -1}
	if o.set {
		b.debt = int64(min(o.debt, maxSpan))
	}
	b.start = b.clock()
	b.params.Store(b.newParams(rate, burst, 0, nil))
	// TAT 0 = now: the bucket starts full.
	return b, nil
}

func checkRate(field string, rate float64) error {
	if !(rate > 0) || math.IsInf(rate, 0) {
		return invalid(field, rate, "a finite number of tokens per second > 0")
	}
	return nil
}

func (b *Bucket) newParams(rate, burst float64, gen int64, prev *params) *params {
	ns := 1e9 / rate
	p := &params{
		rate:       rate,
		burst:      burst,
		nsPerToken: ns,
		gen:        gen & genMask,
		scale:      1,
	}
	if tau := math.Floor(burst * ns); tau < maxSpan {
		p.tau = int64(tau)
	} else {
		p.tau = maxSpan
	}
	debt := b.debt
	if debt < 0 {
		debt = p.tau
	}
	p.limit = min(p.tau+debt, maxSpan)
	p.prevBurst = burst
	if prev != nil {
		p.prevGen = prev.gen
		p.prevNsPerToken = prev.nsPerToken
		p.prevBurst = prev.burst
	}
	return p
}

// now is the bucket's clock relative to its creation.
func (b *Bucket) now() int64 { return b.clock() - b.start }

// Rate returns the refill rate in tokens per second.
func (b *Bucket) Rate() float64 { return b.params.Load().rate }

// Burst returns the capacity in tokens.
func (b *Bucket) Burst() float64 { return b.params.Load().burst }

// load returns a state and the parameters it was computed with, finishing
// any rescale a concurrent SetRate has left half done.
func (b *Bucket) load() (s int64, p *params) {
	for {
		s = b.state.Load()
		p = b.params.Load()
		switch s & genMask {
		case p.gen:
			return s, p
		case p.prevGen:
			b.rescale(s, p)
		}
		// Otherwise p is already newer than s's successor; reload both.
	}
}

// rescale moves state s from p's predecessor to p (see rescaled).
func (b *Bucket) rescale(s int64, p *params) {
	tat, now := s>>genBits, b.now()
	var backlog float64 // tokens of the previous parameters
	if tat > now {
		backlog = float64(tat-now) / p.prevNsPerToken
	}
	if tat > now || p.scale < 1 {
		if nb := p.rescaled(backlog); nb > 0 {
			tat = now + clampSpan(math.Ceil(nb*p.nsPerToken))
		} else {
			tat = min(tat, now) // full: keep a TAT in the past (idle time repays what is owed)
		}
	}
	if b.state.CompareAndSwap(s, tat<<genBits|p.gen) {
		p.change.Store(&change{backlog: backlog}) // one CAS moves to p: one record
	}
}

// rescaled is the backlog, in tokens of p, that a backlog of x tokens
// under p's predecessor becomes: unchanged, except that the tokens in hand
// (burst - backlog, when positive) are multiplied by p.scale, capped at
// the burst. A resize keeps a bucket's fill; SetSMLimit scales the saving;
// debt, work already admitted, is kept.
func (p *params) rescaled(x float64) float64 {
	x = max(x, 0)
	if (p.scale != 1 || p.burst != p.prevBurst) && x < p.prevBurst {
		x = p.burst - min((p.prevBurst-x)*p.scale, p.burst)
	}
	return max(x, 0)
}

// through carries g tokens, taken before the change to p, across it (see
// change).
func (p *params) through(g float64) float64 {
	c := p.change.Load()
	for c == nil {
		// load saw the state moved to p: the rescale that moved it is
		// between its CAS and the record.
		runtime.Gosched()
		c = p.change.Load()
	}
	for {
		old := c.given.Load()
		given := math.Float64frombits(old)
		if c.given.CompareAndSwap(old, math.Float64bits(given+g)) {
			x := c.backlog - given
			return p.rescaled(x) - p.rescaled(x-g)
		}
	}
}

// carry converts g tokens taken under from into tokens of p, as the
// changes between them would have left them had they been given back
// before the first: a lowered share scales them down with the tokens in
// hand, a raised one up. Changes of rate alone keep tokens as they are.
// Every change since from is walked, however many: one carried through
// only the last few came back as nothing (issue 56: a reservation held
// across a storm of SetSMLimit lost its tokens for good).
func (b *Bucket) carry(g float64, from, p *params) float64 {
	if from.scales == p.scales {
		return g
	}
	for q := from; q != p && g > 0; {
		if q = q.next.Load(); q == nil {
			// Unreachable: from is p or older (p was published after the
			// charge that took from), and p is reached from it.
			return 0
		}
		g = q.through(g)
	}
	return g
}

// settle returns the state and its parameters at bucket time now, first
// moving what is owed into the backlog up to half the burst (or, if a
// cancelled reservation left owed negative, back out of it). Idle time
// thus repays debt at the full rate, while half the burst stays open to the
// launches that repay the rest alongside their own charge (repay).
func (b *Bucket) settle(now int64) (s int64, p *params) {
	for {
		s, p = b.load()
		o := b.owed.Load()
		if o == 0 {
			return s, p
		}
		// The TAT is not clamped to now here: time the bucket spent full
		// since it was last looked at has repaid debt too.
		tat := s >> genBits
		var m int64
		if o > 0 {
			m = min(o, now+p.tau/2-tat) // up to half the burst, never below the backlog
			if m <= 0 {
				return s, p
			}
		} else {
			tat = max(tat, now)
			m = max(o, now-tat) // back out, never past full
			if m >= 0 {
				return s, p
			}
		}
		// State first, then owed: two top-ups racing may move too much for
		// a moment, which over-charges (under-admits) until the next
		// settle gives it back; never the reverse.
		if b.state.CompareAndSwap(s, (tat+m)<<genBits|p.gen) {
			b.owed.Add(-m)
		}
	}
}

// took is what one acquire charged: ns added to the backlog, and ns owed
// (charged over time), at the token interval of p. Giving both back undoes
// the acquire exactly.
type took struct {
	charged, owed int64
	p             *params
}

// split bounds a charge of need ns so that the backlog after it stays
// within the debt bound; the rest is owed.
func (p *params) split(need int64) took {
	c := min(need, p.limit)
	return took{charged: c, owed: need - c, p: p}
}

// repay takes up to k.charged of what is owed onto this charge: while an
// oversized charge is being repaid, later launches pay at most double, so
// the tenant's other streams slow down instead of stopping, and the owed
// time is repaid even when the bucket never idles. It returns the extra ns
// to add to the backlog (not to the launch's due time).
func (b *Bucket) repay(k *took) int64 {
	for {
		o := b.owed.Load()
		if o <= 0 {
			return 0
		}
		m := min(o, k.charged)
		if b.owed.CompareAndSwap(o, o-m) {
			k.owed -= m // giving k back returns m to owed
			k.charged += m
			return m
		}
	}
}

// TryAcquire takes n tokens if they are available now and reports whether
// it did; otherwise it takes nothing.
func (b *Bucket) TryAcquire(n float64) bool {
	_, ok := b.tryAt(n, b.clock())
	return ok
}

// tryAt is TryAcquire at clock reading raw.
func (b *Bucket) tryAt(n float64, raw int64) (took, bool) {
	if !(n > 0) {
		return took{}, !math.IsNaN(n)
	}
	if math.IsInf(n, 1) {
		return took{}, false
	}
	now := raw - b.start
	// Fast path, the launch path's usual case: nothing owed, no rescale
	// pending, the charge fits. One CAS; anything else takes the loop.
	if s, p := b.state.Load(), b.params.Load(); s&genMask == p.gen && b.owed.Load() == 0 {
		tat := max(s>>genBits, now)
		if c := p.charge(n); c <= p.limit && tat-now+c <= p.tau &&
			b.state.CompareAndSwap(s, (tat+c)<<genBits|p.gen) {
			return took{charged: c, p: p}, true
		}
	}
	fresh := false
	for {
		s, p := b.settle(now)
		tat := max(s>>genBits, now)
		k := p.split(p.charge(n))
		if tat-now+k.charged > max(p.tau, k.charged) {
			// raw may predate a charge another caller made at a later
			// reading (a goroutine descheduled between its clock read
			// and here sees the bucket that much behind): refuse only on
			// a fresh reading. Admissions still read the clock once.
			if !fresh {
				fresh = true
				if t := b.now(); t > now {
					now = t
					continue
				}
			}
			return took{}, false
		}
		x := b.repay(&k)
		if b.state.CompareAndSwap(s, (tat+k.charged)<<genBits|p.gen) {
			if k.owed+x > 0 {
				b.owed.Add(k.owed + x)
			}
			return k, true
		}
		b.owed.Add(x) // not taken after all
		// Lost a race. Re-reading the clock is not needed for correctness
		// (an older now only makes the check stricter) and costs ~20 ns.
	}
}

// Reserve takes n tokens unconditionally, going into debt if the bucket does
// not hold them, and returns how long from now until they would have been
// available; the caller must not use them before then. Zero means now.
// A NaN or infinite n takes nothing and returns math.MaxInt64.
func (b *Bucket) Reserve(n float64) (wait time.Duration) {
	due, now, _ := b.reserveAt(n, b.clock())
	return time.Duration(due - now)
}

// reserve is Reserve in bucket time: it returns the instant the tokens are
// due and the instant they were reserved at.
func (b *Bucket) reserve(n float64) (due, now int64) {
	due, now, _ = b.reserveAt(n, b.clock())
	return due, now
}

// reserveAt is reserve at clock reading raw, also returning what it took.
func (b *Bucket) reserveAt(n float64, raw int64) (due, now int64, k took) {
	if math.IsInf(n, 1) || math.IsNaN(n) {
		return math.MaxInt64, 0, took{}
	}
	now = raw - b.start
	if !(n > 0) {
		return now, now, took{}
	}
	// Fast path, as in tryAt: nothing owed, no rescale pending, a charge
	// within the debt bound. One CAS.
	if s, p := b.state.Load(), b.params.Load(); s&genMask == p.gen && b.owed.Load() == 0 {
		tat := max(s>>genBits, now)
		if c := p.charge(n); c <= p.limit &&
			b.state.CompareAndSwap(s, min(tat+c, now+maxSpan)<<genBits|p.gen) {
			return max(tat+c-max(p.tau, c), now), now, took{charged: c, p: p}
		}
	}
	for {
		s, p := b.settle(now)
		tat := max(s>>genBits, now)
		k = p.split(p.charge(n))
		// The tokens are due when the backlog they leave fits the burst
		// (for an oversized n: when the bucket is full), exactly the moment
		// TryAcquire would have admitted them.
		due = tat + k.charged - max(p.tau, k.charged)
		x := b.repay(&k)
		next := min(tat+k.charged, now+maxSpan) // saturate rather than overflow
		if b.state.CompareAndSwap(s, next<<genBits|p.gen) {
			if k.owed+x > 0 {
				b.owed.Add(k.owed + x)
			}
			return max(due, now), now, k
		}
		b.owed.Add(x) // not taken after all
	}
}

// giveBack undoes an acquire that took k: what was owed is no longer owed
// and the charge leaves the backlog (never past full).
func (b *Bucket) giveBack(k took) (left int64, at *params) {
	if k.owed != 0 {
		b.owed.Add(-k.owed)
	}
	return b.refundNs(k.charged, k.p)
}

// Refund returns n tokens taken earlier (by TryAcquire, Reserve or Wait).
// The bucket never holds more than its burst, so refunding to a full bucket
// is a no-op.
func (b *Bucket) Refund(n float64) {
	if !(n > 0) || math.IsInf(n, 1) {
		return
	}
	b.refund(n)
}

// refund is Refund, returning what a live lease kept it from giving back
// (see refundNs).
func (b *Bucket) refund(n float64) (left int64, at *params) { return b.refundFrom(n, nil) }

// refundFrom is refund of n tokens taken under from (nil: the current
// parameters).
func (b *Bucket) refundFrom(n float64, from *params) (left int64, at *params) {
	if from == nil {
		from = b.params.Load()
	}
	// Round down: a refund may give back a nanosecond less, never more.
	return b.refundNs(int64(min(math.Floor(n*from.nsPerToken), maxSpan)), from)
}

// refundNs gives back ns charged at the token interval of from (nil: the
// current one). Charged before a change, they are carried across it: the
// tokens go back, not the nanoseconds, and as the change would have left
// them had they been in the bucket (see carry). A refund does not lower the TAT
// into a live lease's slice (keep); what that kept it from giving back is
// returned, in ns at the interval of at, for the caller to give once the
// lease is returned (Limiter.refundDevice).
func (b *Bucket) refundNs(give int64, from *params) (left int64, at *params) {
	if give <= 0 {
		return 0, nil
	}
	now := b.now()
	for {
		s, p := b.load()
		if from != nil && from != p {
			// Once per change (carry counts what crossed it), before the
			// test for full: a give-back a full bucket drops still counts.
			// Rounded down: a nanosecond less, never more.
			give = int64(min(math.Floor(b.carry(float64(give)/from.nsPerToken, from, p)*p.nsPerToken), maxSpan))
			if from = p; give <= 0 {
				return 0, nil
			}
		}
		tat := s >> genBits
		if tat <= now {
			return 0, nil // already full
		}
		next := max(tat-give, now)
		if k := min(b.keep.Load(), tat); next < k {
			left, next = k-next, k
		}
		if b.state.CompareAndSwap(s, next<<genBits|p.gen) {
			return left, p
		}
		left = 0
	}
}

// SetRate changes the refill rate. The tokens in the bucket (or its debt)
// are kept, converted to the new rate, so the next acquire is charged and
// refilled at the new rate: the old rate is never enforced for longer than
// the acquire that was in flight, and the next token under the new rate is
// due within one new token interval.
func (b *Bucket) SetRate(rate float64) error { return b.setRate(rate, 1) }

// setRate is SetRate that also multiplies the tokens in hand by scale (> 0;
// debt is kept): Limiter.SetSMLimit scales them with the limit.
func (b *Bucket) setRate(rate, scale float64) error { return b.setRateBurst(rate, 0, scale) }

// setRateBurst is setRate that also resizes the bucket to burst tokens (0:
// keep its size): Limiter.SetSMs.
func (b *Bucket) setRateBurst(rate, burst, scale float64) error {
	if err := checkRate("rate", rate); err != nil {
		return err
	}
	if burst != 0 && (!(burst > 0) || math.IsInf(burst, 0)) {
		return invalid("burst", burst, "a finite number of tokens > 0")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	old := b.params.Load()
	if burst == 0 {
		burst = old.burst
	}
	p := b.newParams(rate, burst, old.gen+1, old)
	p.scale = scale
	p.scales = old.scales
	if scale != 1 || burst != old.burst {
		p.scales++
	}
	old.next.Store(p) // before p is published: a carry from old reaches it
	b.params.Store(p)
	// Finish the move to the new generation before another SetRate may
	// start, so that every state is always of the current or the previous
	// generation (load relies on it).
	for {
		s := b.state.Load()
		if s&genMask == p.gen {
			return nil
		}
		b.rescale(s, p)
	}
}
