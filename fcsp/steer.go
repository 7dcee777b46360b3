package fcsp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/lockorder"
	"github.com/fcsp-go/fcsp-go/internal/smctl"
)

// SMs that follow the load (WithLatencyTarget, issue 41). A pool with a
// latency class and a rest tenant made after it runs one controller
// goroutine: every millisecond it samples the latency class (its Dos and
// Synchronizes in flight, the P99 of its Synchronizes over the last 20 ms
// that started after the last move ended, whether the last move still
// drains) and asks internal/smctl what it should hold; a
// move reshapes the two tenants, the one giving SMs first, then the other,
// whose Reshape takes them once the work the giver queued before has run
// (handoff.go). Both were made with every
// size the controller may choose (their green contexts built at
// NewTenant; DoEach warms them), so a move costs two Reshapes (a few
// microseconds, plus the wait for each tenant's calls in flight) and the
// giver's queued work.

// Controller timing: sampled every tick; a P99 over window; shrinks after
// hold; moves at least gap apart.
const (
	steerTick   = time.Millisecond
	steerWindow = 20 * time.Millisecond
	steerHold   = 50 * time.Millisecond
	steerGap    = 2 * time.Millisecond
	// steerPeak samples: a class's requests in flight are the most seen
	// over the last few ticks, since one instant undercounts them (a
	// request between its Do and its Synchronize, or held by a Reshape,
	// is not in a call). Measured on an H100 (run YY): a burst's sixteen
	// read as 2 to 11 at one instant, so the class grew to 48 SMs in four
	// moves over 30 ms instead of one.
	steerPeak = 4
)

// steer is the pool's controller, wired when both tenants exist. Its
// fields are guarded by mu (Pool.mu is taken before it where both are).
type steer struct {
	mu     lockorder.Mutex[lockorder.PoolSteer]
	lat    *tenantCore // the latency class
	rest   *tenantCore // the throughput class it trades SMs with
	ctl    *smctl.Controller
	stop   context.CancelFunc // ends the goroutine, and a move's wait for the giver's work
	done   chan struct{}
	moves  uint64
	by     SMMoveCounts
	reason string
}

// SMMoveCounts counts a latency class's SM moves by the rule that made
// each (Stats.SMMovesBy).
type SMMoveCounts struct {
	GrowLoad uint64 // more requests in flight than its SMs were sized for
	GrowP99  uint64 // its recent P99 over target, two requests or more over it, further apart than a host stall
	Shrink   uint64 // the load asked for less for 50 ms, the P99 within target or nothing in flight
	Trim     uint64 // a full load's P99 within 85% of target, and within it scaled to a step less, 50 ms after the last move: one step less for bursts
}

// add counts one move of kind k.
func (n *SMMoveCounts) add(k smctl.Kind) {
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

// latencyLog keeps a latency class's recent request times (its
// Synchronizes), written without locks by the requests, read by the
// controller alone.
type latencyLog struct {
	waiting atomic.Int64 // Synchronizes under way
	next    atomic.Uint64
	ring    [2048]struct{ at, d atomic.Int64 }
	buf     []int64 // the controller's
}

// begin counts a request (a Synchronize) under way and says when it
// began; on a nil log (a tenant that is no latency class) it does nothing.
func (l *latencyLog) begin() time.Time {
	if l == nil {
		return time.Time{}
	}
	l.waiting.Add(1)
	return time.Now()
}

// end ends what begin began, logging its time where it succeeded.
func (l *latencyLog) end(start time.Time, ok bool) {
	if l == nil {
		return
	}
	l.waiting.Add(-1)
	if ok {
		l.add(start, time.Since(start))
	}
}

func (l *latencyLog) add(start time.Time, d time.Duration) {
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
}

// tail is the P99 of the requests that started at since or later, how
// many of them took longer than target and how far apart those started
// (one stall of the host slows a moment's requests; too few SMs, the
// window's), and how many there were.
func (l *latencyLog) tail(since time.Time, target time.Duration) (r recent) {
	from := since.UnixNano()
	first, last := int64(math.MaxInt64), int64(math.MinInt64)
	l.buf = l.buf[:0]
	for i := range l.ring {
		e := &l.ring[i]
		at := e.at.Load()
		if at < from {
			continue
		}
		d := e.d.Load()
		l.buf = append(l.buf, d)
		if d > int64(target) {
			r.slow++
			first, last = min(first, at), max(last, at)
		}
	}
	if r.n = len(l.buf); r.n == 0 {
		return r
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

// requests is a latency class's requests in flight: its Dos and its
// Synchronizes under way, not its other calls (a scrape's Stats, an
// Alloc, a Launch from inside a Do, which the life lock counts too and
// would read as load).
func (c *tenantCore) requests() int { return inFlight(&c.dos, &c.lat.waiting) }

// inFlight is dos' count plus waiting, with waiting read on both sides of
// the count and the smaller kept: a request that goes from its Do to its
// Synchronize (or from one to its next Do) while dos is counted would
// otherwise be counted twice, and none goes from a Synchronize through a
// Do to another Synchronize in one count. Measured on an H100 (run F1,
// 2026-12-06): one request goroutine read as two now and then, and grew
// its class 8 SMs for 50 ms five times in a 16 s run's quiet phases.
func inFlight(dos interface{ Count() int }, waiting *atomic.Int64) int {
	w := waiting.Load()
	n := dos.Count()
	return n + int(min(w, waiting.Load()))
}

// latencySizes is the latency class's sizes: its bounds, in units.
func latencySizes(min, max, unit int) []int {
	var out []int
	for n := min; n <= max && unit > 0; n += unit {
		out = append(out, n)
	}
	return out
}

// shapeSteered fills in a latency class's start and sizes, or a rest
// tenant's sizes where a latency class exists to trade with. The caller
// holds p.mu.
func (p *Pool) shapeSteered(cfg *tenantConfig) error {
	unit := p.split.GroupSMs()
	p.steer.mu.Lock()
	defer p.steer.mu.Unlock()
	switch {
	case cfg.Latency.Min > 0:
		if p.steer.lat != nil {
			return fmt.Errorf("%w: WithLatencyTarget: %s is this pool's latency class already; one per pool", ErrInvalidArgument, tenantName(p.steer.lat.name))
		}
		if unit == 0 || cfg.Latency.Min%unit != 0 || cfg.Latency.Max%unit != 0 {
			return fmt.Errorf("%w: WithLatencyTarget bounds %d..%d SMs; this pool's partitions are multiples of %d", ErrGranularity, cfg.Latency.Min, cfg.Latency.Max, unit)
		}
		cfg.SMs, cfg.Shape.Sizes = cfg.Latency.Min, latencySizes(cfg.Latency.Min, cfg.Latency.Max, unit)
	case cfg.Rest && p.steer.lat != nil && p.steer.rest == nil && len(cfg.Shape.Sizes) == 0:
		lat := p.steer.lat
		all := p.split.FreeSMs() + p.spare.SMs()
		for k := 0; lat.place.SMs()+k*unit <= lat.mostSMs(); k++ {
			if n := all - k*unit; n > 0 {
				cfg.Shape.Sizes = append(cfg.Shape.Sizes, n)
			}
		}
	}
	return nil
}

// mostSMs is the latency class's most SMs (its last size).
func (c *tenantCore) mostSMs() int {
	s := c.place.Sizes()
	return s[len(s)-1]
}

// wireSteered records a latency class, or the rest tenant that completes
// the pair, and then starts the controller. The caller holds p.mu.
func (p *Pool) wireSteered(c *tenantCore, cfg *tenantConfig) {
	st := &p.steer
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case cfg.Latency.Min > 0:
		c.lat = &latencyLog{}
		st.lat = c
		ctl, err := smctl.New(smctl.Config{Min: cfg.Latency.Min, Max: c.mostSMs(), Unit: p.split.GroupSMs(), Target: cfg.Latency.Target,
			FullAt: c.place.Dos(), Hold: steerHold, MinGap: steerGap})
		if err != nil {
			return // bounds were checked in shapeSteered
		}
		st.ctl = ctl
	case cfg.Rest && st.ctl != nil && st.rest == nil && c.place.Reshapable():
		st.rest = c
		var ctx context.Context
		ctx, st.stop = context.WithCancel(context.Background())
		st.done = make(chan struct{})
		go p.runSteer(ctx, st.lat, c, st.ctl, st.done)
	}
}

// unwireSteered stops the controller when one of its tenants closes,
// after the move under way, if any, has ended.
func (p *Pool) unwireSteered(c *tenantCore) {
	st := &p.steer
	st.mu.Lock()
	if st.lat != c && st.rest != c {
		st.mu.Unlock()
		return
	}
	stop, done := st.stop, st.done
	if st.lat == c {
		st.lat, st.ctl = nil, nil
	}
	st.rest, st.stop, st.done = nil, nil, nil
	st.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// runSteer is the controller's goroutine.
func (p *Pool) runSteer(ctx context.Context, lat, rest *tenantCore, ctl *smctl.Controller, done chan struct{}) {
	defer close(done)
	tick := time.NewTicker(steerTick)
	defer tick.Stop()
	total := lat.place.SMs() + rest.place.SMs()
	target := ctl.Config().Target
	var seen peak
	var moved time.Time // the end of the last move
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		// The requests of the window that ran at the size held now: those
		// that started before the last move ended ran at the size before
		// it, or waited for it. Measured on an H100 (run C1, 2026-12-06):
		// with the window alone, a 32-SM step's slow requests were read at
		// 40 SMs too, and grew the class past what its target needed.
		r := lat.lat.tail(later(now.Add(-steerWindow), moved), target)
		in, rising := seen.add(lat.requests())
		s := smctl.Sample{At: now, SMs: lat.place.SMs(), InFlight: in, Rising: rising, P99: r.p99, Slow: r.slow, Spread: r.spread, Requests: r.n,
			Draining: !drained(lat) || !drained(rest)}
		m := ctl.Decide(s)
		if m.SMs == s.SMs {
			continue
		}
		start := time.Now()
		err := p.moveSMs(ctx, lat, rest, s.SMs, m.SMs, total)
		if errors.Is(err, ErrClosed) {
			return
		}
		moved = time.Now()
		p.steer.mu.Lock()
		if err == nil {
			p.steer.moves++
			p.steer.by.add(m.Kind)
			p.steer.reason = m.Reason
		} else {
			p.steer.reason = fmt.Sprintf("%s: refused: %v", m.Reason, err)
		}
		p.steer.mu.Unlock()
		p.logMove(lat, rest, s.SMs, m, total, time.Since(start), err)
	}
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// logMove is the debug line of one move (or refusal), as the pool's other
// lifecycle lines: the latency class, its SMs before and after, the rest
// tenant's after, the rule and the reason. Its arguments are built only
// where the line is kept.
func (p *Pool) logMove(lat, rest *tenantCore, from int, m smctl.Move, total int, took time.Duration, err error) {
	if !p.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	msg, restSMs := "SMs moved", total-m.SMs
	if err != nil {
		msg, restSMs = "SM move refused", rest.place.SMs()
	}
	args := []any{"tenant", lat.name, "from_sms", from, "sms", m.SMs, "rest", rest.name, "rest_sms", restSMs,
		"kind", m.Kind.String(), "reason", m.Reason, "took", took}
	if err != nil {
		args = append(args, "err", err)
	}
	p.log.Debug(msg, args...)
}

// moveSMs reshapes the latency class from from to to SMs and the rest to
// what is left of total: the one giving SMs first, then the other, whose
// Reshape takes them once the work the giver queued before has run, or
// 15 ms have passed (awaitHandOff). Its errors name the tenant whose
// Reshape failed; ErrClosed where ctx ended first (the controller
// stopped), the giver's SMs given back.
func (p *Pool) moveSMs(ctx context.Context, lat, rest *tenantCore, from, to, total int) error {
	bg := context.Background() // the giver's Reshapes: a move begun is ended or undone
	give, take, giveFrom, giveTo, takeTo := rest, lat, total-from, total-to, to
	if to < from {
		give, take, giveFrom, giveTo, takeTo = lat, rest, from, to, total-to
	}
	if err := give.fail("Reshape", give.Reshape(bg, giveTo)); err != nil {
		return err
	}
	if err := take.Reshape(ctx, takeTo); err != nil {
		undo := give.fail("Reshape", give.Reshape(bg, giveFrom))
		if ctx.Err() != nil {
			return errors.Join(ErrClosed, undo)
		}
		return errors.Join(take.fail("Reshape", err), undo)
	}
	return nil
}

// moves is what the latency class's Stats says of the controller.
func (p *Pool) steerStats(c *tenantCore, s *Stats) {
	st := &p.steer
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.lat == c {
		s.SMMoves, s.SMMoveReason, s.SMMovesBy = st.moves, st.reason, st.by
		if st.ctl != nil {
			s.LatencyTarget = st.ctl.Config().Target
		}
	}
}
