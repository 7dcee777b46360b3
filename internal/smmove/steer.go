package smmove

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/place"
	"github.com/fcsp-go/fcsp-go/internal/smctl"
)

// SMs that follow the load (fcsp.WithLatencyTarget). A pool with a latency
// class and a rest tenant made after it runs one controller goroutine:
// every millisecond it samples the class (its Dos and Synchronizes in
// flight, the P99 of its Synchronizes over the last 20 ms that started
// after the last move ended, whether the last move still drains) and asks
// internal/smctl what it should hold; a trade reshapes the two tenants,
// the one giving SMs first, then the other, whose growth takes them once
// the work the giver queued before has run (AwaitHandOff; the class's at
// once under GrowAtOnce). Both were made
// with every size the controller may choose (their green contexts built
// at NewTenant; DoEach or WithWarmup warms them), so a trade costs two
// Reshapes (a few microseconds, plus the wait for each tenant's calls in
// flight) and the giver's queued work.

// Controller timing: sampled every tick; a P99 over window; shrinks after
// hold, to the floor after idleHold (a burst that ended: on an H100, run
// H1, the 50 ms hold cost the batch about 7% of each 300 ms quiet phase;
// requests in flight are the most of steerPeak ticks, so a lull between a
// burst's requests does not read as its end); moves at least gap apart.
const (
	steerTick     = time.Millisecond
	steerWindow   = 20 * time.Millisecond
	SteerHold     = 50 * time.Millisecond
	steerIdleHold = 15 * time.Millisecond
	steerGap      = 2 * time.Millisecond
	// steerPeak samples: a class's requests in flight are the most seen
	// over the last few ticks, since one instant undercounts them (a
	// request between its Do and its Synchronize, or held by a Reshape,
	// is not in a call). Measured on an H100 (run YY): a burst's sixteen
	// read as 2 to 11 at one instant, so the class grew to 48 SMs in four
	// moves over 30 ms instead of one.
	steerPeak = 4
)

// Counts counts a latency class's SM moves by the rule that made each
// (fcsp.SMMoveCounts has its fields).
type Counts struct {
	GrowLoad uint64
	GrowP99  uint64
	Shrink   uint64
	Trim     uint64
}

// add counts one move of kind k.
func (n *Counts) add(k smctl.Kind) {
	switch k {
	case smctl.GrowLoad:
		n.GrowLoad++
	case smctl.GrowP99:
		n.GrowP99++
	case smctl.Shrink:
		n.Shrink++
	case smctl.Trim:
		n.Trim++
	}
}

// Class is a latency class: its bounds and target, its requests' times
// (Log, written by its Synchronizes) and its controller's moves, kept by
// its tenant, whose Stats read them after it closed too. A new class
// starts with none.
type Class struct {
	Log      Log
	Min, Max int           // SMs
	Target   time.Duration // the P99 its requests should meet; 0 with Relative
	Relative float64       // the target as a factor of its P99 at Max (smctl.Config.RelativeTarget)

	mu       sync.Mutex // a leaf; protects the following fields
	moves    uint64
	by       Counts
	reason   string
	now      time.Duration // the target now (Relative's, once measured)
	moveTime Hist          // each move's time, from its decision to the new SMs serving
	recovery Hist          // each burst's time from its first request to its P99 back within target
}

// MoveBounds are the upper bounds of Hist's buckets: a move's time (a
// Reshape's microseconds, a hand-over's milliseconds) and a burst's
// recovery (tens of milliseconds to a second).
var MoveBounds = [12]time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond, time.Millisecond,
	2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond,
	50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond, time.Second,
}

// Hist is a histogram of durations: Le[i] counts those at most
// MoveBounds[i]; Count and Total all of them.
type Hist struct {
	Count uint64
	Total time.Duration
	Le    [12]uint64
}

func (h *Hist) add(d time.Duration) {
	h.Count++
	h.Total += d
	for i, b := range MoveBounds {
		if d <= b {
			h.Le[i]++
		}
	}
}

// Times is a class's histograms: its moves' times and its bursts'
// recoveries.
func (c *Class) Times() (moves, recovery Hist) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.moveTime, c.recovery
}

// Begin counts a request (a Synchronize) of the class under way and says
// when it began; on a nil Class (a tenant that is no latency class) it
// does nothing.
func (c *Class) Begin() time.Time {
	if c == nil {
		return time.Time{}
	}
	return c.Log.Begin()
}

// End ends what Begin began, logging its time where it succeeded.
func (c *Class) End(start time.Time, ok bool) {
	if c != nil {
		c.Log.End(start, ok)
	}
}

// Stats is what the class's Stats say of its moves, and its target now
// (a relative one's, once measured; 0 before).
func (c *Class) Stats() (moves uint64, by Counts, reason string, target time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.Relative == 0 {
		return c.moves, c.by, c.reason, c.Target
	}
	return c.moves, c.by, c.reason, c.now
}

// record counts a move (err nil), its time, or its refusal.
func (c *Class) record(m smctl.Move, took time.Duration, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		c.moves++
		c.by.add(m.Kind)
		c.reason = m.Reason
		c.moveTime.add(took)
	} else {
		c.reason = fmt.Sprintf("%s: refused: %v", m.Reason, err)
	}
}

// Log keeps a latency class's recent request times (its Synchronizes),
// written without locks by the requests, read by the controller alone.
type Log struct {
	waiting atomic.Int64 // Synchronizes under way
	next    atomic.Uint64
	ring    [2048]struct{ at, d atomic.Int64 }
	buf     []int64 // the controller's
}

// Begin counts a request (a Synchronize) under way and says when it began.
func (l *Log) Begin() time.Time {
	l.waiting.Add(1)
	return time.Now()
}

// End ends what Begin began, logging its time where it succeeded.
func (l *Log) End(start time.Time, ok bool) {
	l.waiting.Add(-1)
	if ok {
		l.add(start, time.Since(start))
	}
}

func (l *Log) add(start time.Time, d time.Duration) {
	i := l.next.Add(1) - 1
	e := &l.ring[i%uint64(len(l.ring))]
	e.at.Store(start.UnixNano())
	e.d.Store(int64(d))
}

// recent is what the controller reads of a latency class's recent
// requests.
type recent struct {
	p99    time.Duration // 0: none
	slow   int           // over target
	spread time.Duration // from the first slow request's start to the last's
	n      int
	load   float64 // their times over the span from the first's start to the last's end: how many shared the SMs
}

// tail is the P99 of the requests that started at since or later, how
// many of them took longer than target and how far apart those started
// (one stall of the host slows a moment's requests; too few SMs, the
// window's), and how many there were.
func (l *Log) tail(since time.Time, target time.Duration) (r recent) {
	from := since.UnixNano()
	first, last := int64(math.MaxInt64), int64(math.MinInt64)
	begin, end, busy := int64(math.MaxInt64), int64(math.MinInt64), int64(0)
	l.buf = l.buf[:0]
	for i := range l.ring {
		e := &l.ring[i]
		at := e.at.Load()
		if at < from {
			continue
		}
		d := e.d.Load()
		l.buf = append(l.buf, d)
		begin, end, busy = min(begin, at), max(end, at+d), busy+d
		if d > int64(target) {
			r.slow++
			first, last = min(first, at), max(last, at)
		}
	}
	if r.n = len(l.buf); r.n == 0 {
		return r
	}
	if end > begin {
		r.load = float64(busy) / float64(end-begin)
	}
	if r.slow > 0 {
		r.spread = time.Duration(last - first)
	}
	slices.Sort(l.buf)
	r.p99 = time.Duration(l.buf[min(r.n-1, r.n*99/100)])
	return r
}

// peak is the most requests in flight over the last steerPeak samples.
type peak struct {
	seen [steerPeak]int
	n    int
}

// add records a sample and says the peak, and whether the sample is over
// the one before it (a burst still arriving).
func (p *peak) add(inFlight int) (most int, rising bool) {
	rising = inFlight > p.seen[(p.n+steerPeak-1)%steerPeak]
	p.seen[p.n%steerPeak] = inFlight
	p.n++
	return slices.Max(p.seen[:]), rising
}

// InFlight is a latency class's requests in flight: its Dos' count plus
// its Synchronizes under way (not its other calls: a scrape's Stats, an
// Alloc, a Launch from inside a Do), with the waits read on both sides of
// the count and the smaller kept: a request that goes from its Do to its
// Synchronize (or from one to its next Do) while the Dos are counted
// would otherwise be counted twice, and none goes from a Synchronize
// through a Do to another Synchronize in one count. Measured on an H100
// (run F1, 2026-12-06): one request goroutine read as two now and then,
// and grew its class 8 SMs for 50 ms five times in a 16 s run's quiet
// phases.
func InFlight(dos interface{ Count() int }, l *Log) int {
	w := l.waiting.Load()
	n := dos.Count()
	return n + int(min(w, l.waiting.Load()))
}

// LatencySizes is a latency class's sizes: its bounds, in units;
// ErrGranularity where they are not multiples of the split's groups, and
// ErrInvalidArgument where the pool has a latency class already.
func (e *Engine) LatencySizes(name string, min, max int) ([]int, error) {
	e.mu.Lock()
	latM := e.latM
	e.mu.Unlock()
	if latM != nil {
		return nil, fmt.Errorf("%w: WithLatencyTarget: %q is this pool's latency class already; one per pool", errs.ErrInvalidArgument, latM.Name())
	}
	unit := 0
	if e.split != nil {
		unit = e.split.GroupSMs()
	}
	if unit == 0 || min%unit != 0 || max%unit != 0 {
		return nil, fmt.Errorf("%w: WithLatencyTarget bounds %d..%d SMs; this pool's partitions are multiples of %d", errGranularity, min, max, unit)
	}
	var out []int
	for n := min; n <= max; n += unit {
		out = append(out, n)
	}
	return out, nil
}

// RestSizes is the sizes of a rest tenant made while a latency class waits
// for one: every SM free (free, the spares' included), less each step the
// class may grow from its floor; nil where no class waits. The class is at
// its floor (ForRest).
func (e *Engine) RestSizes(free int) []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lat == nil || e.steer != nil {
		return nil
	}
	unit, extra := e.split.GroupSMs(), e.latM.Place().SMs()-e.lat.Min
	var out []int
	for k := 0; e.lat.Min+k*unit <= e.lat.Max; k++ {
		if n := free + extra - k*unit; n > 0 {
			out = append(out, n)
		}
	}
	return out
}

// ForRest readies the pool for a rest tenant: a latency class that waits
// for one and holds more than its floor (a Reshape by hand) goes back to
// its floor first, so that the rest's sizes are built from it and the
// class can grow into them. The caller runs under Change.
func (e *Engine) ForRest(ctx context.Context) error {
	e.mu.Lock()
	lat, m := e.lat, e.latM
	waits := lat != nil && e.steer == nil
	e.mu.Unlock()
	if !waits || m.Place().SMs() <= lat.Min {
		return nil
	}
	return e.reshape(ctx, m, lat.Min, true)
}

// steerer is the controller of one latency class and its rest.
type steerer struct {
	lat, rest Member
	class     *Class
	ctl       *smctl.Controller
	stop      context.CancelFunc // ends the goroutine, and a move's waits
	done      chan struct{}
}

// startSteer starts the controller, and bounds the rest's queue (horizon
// 0: DefaultHorizon; negative: none). The caller holds e.mu.
func (e *Engine) startSteer(lat, rest Member, class *Class, horizon time.Duration) *steerer {
	ctl, err := smctl.New(smctl.Config{Min: class.Min, Max: class.Max, Unit: e.split.GroupSMs(), Target: class.Target,
		RelativeTarget: class.Relative, FullAt: place.Dos(lat.Place()), Hold: SteerHold, IdleHold: steerIdleHold, MinGap: steerGap})
	if err != nil {
		return nil // the bounds were checked by LatencySizes, the target by the option
	}
	if horizon == 0 {
		horizon = DefaultHorizon
	}
	if horizon > 0 {
		if err := rest.QueueBound(horizon); err != nil {
			e.log.Warn("the rest tenant's queue is not bounded", "tenant", rest.Name(), "err", err)
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	st := &steerer{lat: lat, rest: rest, class: class, ctl: ctl, stop: stop, done: make(chan struct{})}
	go e.runSteer(ctx, st)
	return st
}

// DefaultHorizon is the rest tenant's queue bound while a latency class
// may take its SMs (fcsp.WithQueueHorizon): its next launch or Do waits
// while its queued GPU time is over it, so that a growth waits for about
// the kernel running on each SM it takes, not the queue behind it. On an
// H100 (run J1, the bound's wait sleeping the thread), 8192^3 GEMMs ran at
// 98.6-98.8% of their unbounded rate at 150 µs, 96.9-97.7% at 50 µs, whose
// margin over the host's launch (10-30 µs) a kernel's own variation eats.
const DefaultHorizon = 150 * time.Microsecond

// runSteer is the controller's goroutine.
func (e *Engine) runSteer(ctx context.Context, st *steerer) {
	defer close(st.done)
	tick := time.NewTicker(steerTick)
	defer tick.Stop()
	lat, rest := st.lat, st.rest
	total := lat.Place().SMs() + rest.Place().SMs()
	var seen peak
	var moved time.Time // the end of the last move
	var burst time.Time // the first request of a burst whose P99 is not back within target yet
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		target := st.ctl.Target() // a relative one's, once measured; 0 before
		// The requests of the window that ran at the size held now: those
		// that started before the last move ended ran at the size before
		// it, or waited for it. Measured on an H100 (run C1, 2026-12-06):
		// with the window alone, a 32-SM step's slow requests were read at
		// 40 SMs too, and grew the class past what its target needed.
		r := st.class.Log.tail(later(now.Add(-steerWindow), moved), target)
		in, rising := seen.add(InFlight(lat.Dos(), &st.class.Log))
		s := smctl.Sample{At: now, SMs: lat.Place().SMs(), InFlight: in, Rising: rising, P99: r.p99, Slow: r.slow, Spread: r.spread, Requests: r.n,
			Load: r.load, Draining: !drained(lat) || !drained(rest)}
		burst = st.class.recover(burst, in, rising, r, target, now)
		m := st.ctl.Decide(s)
		if m.SMs == s.SMs {
			continue
		}
		start := time.Now()
		err := e.trade(ctx, lat, rest, s.SMs, m.SMs, total)
		if ctx.Err() != nil {
			return
		}
		moved = time.Now()
		st.class.record(m, moved.Sub(start), err)
		e.logMove(lat, rest, s.SMs, m, total, moved.Sub(start), err)
	}
}

// recover follows a burst: it begins at the tick a quiet class (one
// request in flight at most) finds more arriving, and ends once the P99 of
// the requests since the last move is back within target, when its time
// is counted (Class.Times). It returns the burst's start, zero where none
// is under way.
func (c *Class) recover(burst time.Time, in int, rising bool, r recent, target time.Duration, now time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = target
	switch {
	case burst.IsZero() && rising && in >= 2:
		return now
	case !burst.IsZero() && target > 0 && r.n > 0 && r.p99 <= target:
		c.recovery.add(now.Sub(burst))
		return time.Time{}
	case !burst.IsZero() && in <= 1:
		return time.Time{} // over before its P99 was measured back
	}
	return burst
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// trade reshapes the latency class from from to to SMs and the rest to
// what is left of total: the one giving SMs first, then the other, whose
// growth takes them once the work the giver queued before has run (the
// class's at once where the engine grows so: GrowAtOnce). Where
// the taker fails the giver takes back what it gave (a trade begun is
// ended or undone, whatever ctx says; its waits give way as any move's).
// ErrClosed, joined, where ctx ended (the controller stopped).
func (e *Engine) trade(ctx context.Context, lat, rest Member, from, to, total int) error {
	give, take, giveFrom, giveTo, takeTo := rest, lat, total-from, total-to, to
	if to < from {
		give, take, giveFrom, giveTo, takeTo = lat, rest, from, to, total-to
	}
	if err := e.run(ctx, func() error { return e.reshape(ctx, give, giveTo, true) }); err != nil {
		return err
	}
	wait := take != lat || !e.atOnce // the rest's growth always waits: the class's tail runs there
	err := e.run(ctx, func() error { return e.reshape(ctx, take, takeTo, wait) })
	if err == nil {
		return nil
	}
	bg := context.Background()
	undo := e.run(bg, func() error { return e.reshape(bg, give, giveFrom, true) })
	if ctx.Err() != nil {
		return errors.Join(errs.ErrClosed, undo)
	}
	return errors.Join(err, undo)
}

// logMove is the debug line of one move (or refusal): the latency class,
// its SMs before and after, the rest tenant's after, the rule and the
// reason. Its arguments are built only where the line is kept.
func (e *Engine) logMove(lat, rest Member, from int, m smctl.Move, total int, took time.Duration, err error) {
	if !e.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	msg, restSMs := "SMs moved", total-m.SMs
	if err != nil {
		msg, restSMs = "SM move refused", rest.Place().SMs()
	}
	args := []any{"tenant", lat.Name(), "from_sms", from, "sms", m.SMs, "rest", rest.Name(), "rest_sms", restSMs,
		"kind", m.Kind.String(), "reason", m.Reason, "took", took}
	if err != nil {
		args = append(args, "err", err)
	}
	e.log.Debug(msg, args...)
}
