package admission

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/nap"
)

// The queue bound (issue 56): how much work a throughput class may have
// queued ahead on the GPU. A growth of a latency class takes SMs from the
// class beside it only once the work that class queued on them has run
// (no preemption): on the H100 3.1-4.5 ms per burst, several 8192^3
// GEMMs. With the bound on (SetQueueBound), a tenant's next launch or Do
// is admitted only while its queued GPU time is under the horizon, so a
// growth waits for about the kernel running and at most one behind it.
//
// What the tenant has queued is known two ways, and the larger is taken:
//
//   - predicted: a virtual finish time (qtat), as a GCRA bucket keeps a
//     theoretical arrival time, of the tenant's work run one after
//     another at the GPU's pace: each admission moves it on by the work's
//     estimate (the horizon's worth before the first measurement), each
//     completion corrects it by the work's own time (its measured time
//     less its lead: own) less that estimate, and a look that finds
//     nothing in flight and nothing on its way (admitted, not yet in a
//     meter: land) brings it back to now. It says how far the kernel
//     running has got, which no event does, so the next work goes in the
//     horizon before it ends and the GPU is kept busy.
//   - seen: the estimates of the work the events have not seen complete,
//     less the one that may be nearly done (the largest of the streams'
//     oldest). A prediction that ran ahead of the GPU (a kernel slowed
//     by fewer SMs, or held) cannot let more in than this allows.
//
// So whatever the timing, what the tenant has in flight stays under the
// horizon plus two pieces of work: the one running and the one admitted
// last; with a good prediction, under the horizon plus the one running.
//
// What a throughput class gives up for it: queue depth. Its goroutines
// wait in admission (TryLaunch and TryDo are refused with ErrThrottled)
// instead of queuing ahead, and work it runs side by side on several
// streams is counted as if run one after another, so it overlaps less.
// With a horizon above the host's reaction time (the wait wakes on its
// own prediction, a thread's timer slack late, then spins) the GPU is
// meant not to idle between its kernels; it does a little (on an H100,
// run J1: two streams of 8192^3 GEMMs at 98.6-98.8% of their rate
// unbounded at 150 us, 96.9-97.7% at 50 us). Before the wait slept the
// thread (nap), 150 us ran at 83.5% (run I1): each wait over spinBelow
// slept on a Go timer, which wakes a millisecond late in a process whose
// processors are idle (internal/nap). Off (the default) it costs an admission
// one atomic load, on metered tenants only; the bound needs the tenant's
// work timed (metered).
//
// One waiter at a time of those outside the tenant's life lock (a Do's, a
// reservation's) looks at the meters and sleeps on the prediction (turn,
// a one-slot channel); the others wait for their turn. A launch's, inside
// the life lock, waits without it: the turn's holder enters the life lock
// to look, and a Reshape's pause would hold it at the gate while waiting
// for that launch. The turn is taken under no lock of this package and
// holds meter.mu (one at a time) while it looks.

// minPause and spinBelow bound the wait's sleeps: it sleeps (internal/nap
// up to nap.Long, a Go timer past it), waking napSlack or timerSlack
// early, and spins (yielding) the last spinBelow. A Go timer wakes about a
// millisecond late in a process whose processors are idle (internal/nap),
// which is what a horizon over spinBelow once paid on every kernel.
const (
	minPause   = 5 * time.Microsecond
	spinBelow  = 60 * time.Microsecond
	napSlack   = 50 * time.Microsecond
	timerSlack = 1200 * time.Microsecond
)

// SetQueueBound bounds the work the tenant queues ahead of the GPU to a
// horizon of GPU time (see the package doc); 0 turns the bound off, which
// is how a tenant starts. It applies from the next admission; admissions
// waiting when it is turned off wait out their look (at most the horizon).
// It needs a metered tenant (its work timed on the GPU: WithGPUMetering
// or a GPU share).
func (t *Tenant) SetQueueBound(horizon time.Duration) error {
	if horizon < 0 {
		return fmt.Errorf("%w: queue bound %v; want a horizon of GPU time >= 0 (0: no bound)", errs.ErrInvalidArgument, horizon)
	}
	if horizon > 0 && !t.cfg.Metered {
		return fmt.Errorf("%w: queue bound on a tenant whose work is not timed; a bound needs a metered tenant (WithGPUMetering or a GPU share)", errs.ErrInvalidArgument)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.turn == nil {
		t.turn = make(chan struct{}, 1)
	}
	if horizon > 0 && t.horizon.Load() == 0 {
		// The work queued before the bound starts the prediction: a
		// launch's is corrected when it completes, as if admitted under
		// it.
		var sum float64
		for _, m := range t.metered() {
			m.mu.Lock()
			for i := range m.pending {
				p := &m.pending[i]
				if p.br == nil && p.q == 0 {
					p.q = p.cost(float64(horizon))
				}
				sum += p.cost(float64(horizon))
			}
			m.mu.Unlock()
		}
		t.qtat.Store(t.now() + int64(sum))
	}
	t.horizon.Store(int64(horizon)) // after turn: a reader of horizon > 0 sees it
	return nil
}

// QueueBound is the horizon SetQueueBound set; 0: none.
func (t *Tenant) QueueBound() time.Duration { return time.Duration(t.horizon.Load()) }

// now is the bound's clock: the tenant's (tests), else monotonic.
func (t *Tenant) now() int64 {
	if t.cfg.Clock != nil {
		return t.cfg.Clock()
	}
	return int64(time.Since(epoch))
}

var epoch = time.Now()

// cost is what the entry stands for in the queue: its estimate (a Do
// bracket's, its runs'), unmeasured the horizon's worth h. Called with
// its meter's mu held.
func (p *timed) cost(h float64) float64 {
	if p.q != 0 {
		return p.q
	}
	var ns float64
	if p.br != nil {
		for _, r := range p.br.runs {
			ns += r.est.get()
		}
	} else {
		ns = p.est.orZero()
	}
	if ns <= 0 {
		return h
	}
	return ns
}

// enqueue admits work estimated at est ns (0: unmeasured) under horizon h
// ns: at once while the tenant's queued GPU time is under h, else, as how
// says, waiting (await) or refused (now: ErrThrottled). It returns what it
// charged the prediction, which the work gives back (dequeue) or corrects
// once measured (settleQueue), and its lead: how long the work queued
// before it was predicted to run still (see own). inLife: the caller is
// in the tenant's life lock (its looks use the primary context as they
// are; else they enter it).
func (t *Tenant) enqueue(ctx context.Context, h int64, est float64, how take, inLife bool) (q, lead float64, err error) {
	if est <= 0 {
		est = float64(h)
	}
	turn := false
	defer func() {
		if turn {
			<-t.turn
		}
	}()
	for {
		// Read before the look: work admitted and not yet queued is in no
		// meter (land), and a prediction moved meanwhile is not reset.
		tr, tat0 := t.transit.Load(), t.qtat.Load()
		lb, idle, err := t.look(inLife)
		if err != nil {
			return 0, 0, err
		}
		at := t.now()
		tat := t.qtat.Load()
		if idle && tr == 0 && tat > at {
			// Nothing in flight, nothing on its way: the GPU ran ahead
			// of the prediction.
			if tat == tat0 && t.qtat.CompareAndSwap(tat, at) {
				t.qshift.Add(at - tat)
			}
			continue
		}
		q := max(float64(tat-at), lb)
		if q < float64(h) {
			if t.qtat.CompareAndSwap(tat, max(tat, at)+int64(est)) {
				t.transit.Add(1) // until its work is in a meter, or given back (land)
				// The lead, less the corrections so far: the work's
				// own time takes it with those made until it is
				// measured (own).
				return est, float64(max(tat-at, 0) - t.qshift.Load()), nil
			}
			continue
		}
		switch {
		case how == now:
			return 0, 0, errs.ErrThrottled
		case t.cfg.Closed():
			return 0, 0, errs.ErrClosed
		case !turn && !inLife:
			// A launch, in the life lock, waits without a turn: the
			// holder may be entering the life lock for its look, held
			// at a Reshape's gate while the Reshape waits for the launch.
			select {
			case t.turn <- struct{}{}:
				turn = true
			case <-ctx.Done():
				return 0, 0, ctx.Err()
			}
			continue // look again: the last turn may have moved things
		}
		if err := pause(ctx, time.Duration(min(q-float64(h), float64(h)))); err != nil {
			return 0, 0, err
		}
	}
}

// orZero is e's estimate, 0 for none (unmeasured).
func (e *Estimate) orZero() float64 {
	if e == nil {
		return 0
	}
	return e.get()
}

// dequeue gives back q charged to the prediction by work that did not
// run, and lands it: nothing of it will be queued.
func (t *Tenant) dequeue(q float64) {
	if q != 0 {
		t.giveBack(q)
		t.land()
	}
}

// giveBack takes q off the prediction.
func (t *Tenant) giveBack(q float64) {
	t.qtat.Add(-int64(q))
	t.qshift.Add(-int64(q))
}

// land ends one admission's transit: its work is in a meter now (a
// ticket's events recorded, a Do's bracket open), or will never be.
// Between its admission and then the work is in no meter, and a look that
// found every meter empty took the GPU for idle and brought the
// prediction back to now, erasing the work's charge: the next work went
// in at once, two kernels queued where the bound means one (on an H100,
// run J1: growths that waited 2.3-2.6 ms, a 1.45 ms kernel and most of
// the next). Each admission that charged the prediction lands once.
func (t *Tenant) land() { t.transit.Add(-1) }

// settleQueue corrects the prediction by what work charged q took, ns
// measured, with lead its lead (own), and returns the time its estimate
// learns: its own time under the bound, ns where it was not charged.
func (t *Tenant) settleQueue(q, ns, lead float64) float64 {
	if q == 0 {
		return ns
	}
	o := t.own(ns, lead)
	t.qtat.Add(int64(o - q))
	t.qshift.Add(int64(o - q))
	return o
}

// behind is the lead of work queued behind other work on its stream
// (own).
var behind = math.Inf(-1)

// own is the work's own GPU time: ns measured less its lead, the time it
// was queued while the work before it was predicted to run still. Events
// time a piece of work from its start event, which completes at once on
// an idle stream (another stream's kernel holding the SMs): admitted the
// horizon before the kernel ahead ends, as the bound means it to be, the
// work measures that kernel's last horizon too. Learnt as it is, the
// estimate grows by it, the prediction ends a horizon late, and the next
// work goes in only once the kernel ahead has ended: the GPU idles for
// the host's launch every kernel (on the H100, 8192^3 GEMMs lost 3.9% of
// their rate to a 50 us horizon, run G2). Less the lead predicted, it
// comes back to the kernel's own time where the prediction was right,
// and corrects it where it was not. Never below half of what was
// measured: a prediction far off corrects over several pieces of work.
//
// The lead is taken against the prediction as corrected until the work
// is measured, not as it was at its admission: the correction of the
// kernel ahead, made after this work went in, would otherwise be made
// twice (once on the prediction, once again through this work's own
// time), and the queue would swing a kernel's worth without end. So the
// lead is kept less the corrections made before the admission (qshift
// then), and the ones made since are added back here.
//
// Work queued behind other work on its own stream has no lead to take
// off: its start event waits for that work (so what it measured is its
// own time already). Its lead is behind. (On an H100, run H1: a batch
// worker's second GEMM of each pair, behind its first, taught the
// estimate a horizon too little, the prediction ran early and a growth
// waited for two GEMMs.)
func (t *Tenant) own(ns, lead float64) float64 {
	if lead == 0 || lead == behind {
		return ns
	}
	l := lead + float64(t.qshift.Load())
	if l <= 0 {
		return ns
	}
	return max(ns-l, ns/2)
}

// look folds in what completed on the tenant's metered streams and
// returns what they have seen in flight: the estimates of the work not
// seen complete less the largest of the streams' oldest (which may be
// nearly done), and whether nothing at all is in flight (no work, no Do
// bracket open).
func (t *Tenant) look(inLife bool) (lb float64, idle bool, err error) {
	if inLife {
		lb, idle, err = t.lookIn(t.cfg.Primary())
		return
	}
	slot, err := t.cfg.Enter()
	if err != nil {
		return 0, false, err
	}
	defer t.cfg.Exit(slot)
	return t.lookIn(t.cfg.Primary())
}

func (t *Tenant) lookIn(ctx cuda.Context) (lb float64, idle bool, err error) {
	h := float64(t.horizon.Load())
	idle = true
	var oldest float64
	for _, m := range t.metered() {
		m.mu.Lock()
		if len(m.pending) > 0 || m.busy { // else nothing to fold
			err = m.pollLocked(ctx)
		}
		for i := range m.pending {
			c := m.pending[i].cost(h)
			lb += c
			if i == 0 {
				oldest = max(oldest, c)
			}
		}
		idle = idle && len(m.pending) == 0 && m.open == nil
		m.mu.Unlock()
		if err != nil {
			return 0, false, err
		}
	}
	return lb - oldest, idle, nil
}

// pause waits about d, waking early rather than late (the GPU would idle
// meanwhile): up to nap.Long it sleeps the thread (nap.Sleep, late by the
// thread's timer slack, deaf to ctx that long at most); past it on a Go
// timer, woken by ctx, which may wake a millisecond late; a short wait
// yields the processor in a loop.
func pause(ctx context.Context, d time.Duration) error {
	d = max(d, minPause)
	if d > spinBelow && d <= nap.Long {
		nap.Sleep(d - napSlack)
		return ctx.Err()
	}
	if d > nap.Long {
		tm := time.NewTimer(d - timerSlack)
		defer tm.Stop()
		select {
		case <-tm.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if err := ctx.Err(); err != nil {
			return err
		}
		runtime.Gosched()
	}
	return nil
}
