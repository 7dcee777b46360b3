package smpart

import (
	"context"
	"errors"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
)

// A green context may be current on one OS thread at a time and the driver
// does no locking of its own, but several green contexts can be built over
// the same SMs and be current on different threads at once, every block of
// each running on those SMs (measured on the H200: 1, 2, 4 and 8 contexts
// over one 16-SM group). So a partition does not serialise the code that
// needs its context current (a Tenant.Do running cuBLAS) behind one lock:
// each layout keeps a small set of green contexts over its SMs, its slots,
// and a caller holds one slot for as long as it keeps a context current.
// Slots are made on demand up to the partition's limit; past it, callers
// queue in arrival order and a freed slot goes straight to the longest
// waiter, so a newcomer cannot barge past it as it can past a sync.Mutex,
// which turns fair only after 1 ms of starvation.
//
// Nothing else takes a slot: every other driver call the SDK makes
// (allocation, memory figures, streams, events, modules, copies) works
// with the device's primary context current (docs/CONTEXTS.md has the table
// measured on the H200), and the primary context may be current on any
// number of threads.

// DefaultSlots is how many green contexts a layout may hold when the caller
// does not say: enough for 16 requests of one class in flight at once.
const DefaultSlots = 16

// Slot is one green context of a layout, held by one caller at a time.
type Slot struct {
	l      *layout
	idx    int
	green  cuda.GreenCtx
	ctx    cuda.Context
	extra  bool          // made by grow: destroyed with the layout's slots
	holder atomic.Int64  // the OS thread it is current on; 0: not named yet
	calls  atomic.Uint64 // times taken: written by its holder alone
	warmed warmSet       // the warm-ups run in it (warm.go)
	_      [64]byte      // holders of neighbouring slots write apart
}

// Context is the slot's CUcontext, to be made current by its holder only.
func (s *Slot) Context() cuda.Context { return s.ctx }

// Name records the OS thread the holder made the context current on, so
// that a nested call on that thread finds it (Holding).
func (s *Slot) Name(thread int) {
	if s != s.l.any { // a shared slot names no holder
		s.holder.Store(int64(thread))
	}
}

// MaxSlots bounds SetSlots: a layout's free slots are the bits of one word.
const MaxSlots = 64

// slots is a layout's set of green contexts. The free ones are bits of one
// word, taken and given back with one atomic operation each, as a
// sync.Mutex's fast path; callers that find none free queue in arrival
// order, and a slot given back while one waits goes straight to the
// longest waiter, so no newcomer barges past a waiter.
type slots struct {
	free atomic.Uint64 // bit i: slot i is free
	at   [MaxSlots]atomic.Pointer[Slot]
	made atomic.Int32            // slots made, the layout's own included
	all  atomic.Pointer[[]*Slot] // every slot made, for Holding and Close
	grow sync.Mutex              // serialises making a slot
	desc cuda.ResourceDesc       // the layout's SMs, to build more contexts
	max  atomic.Int32

	mu sync.Mutex   // guards q
	q  []chan *Slot // waiters, oldest first
	nq atomic.Int32 // len(q)
}

func (l *layout) initSlots(desc cuda.ResourceDesc) {
	own := &Slot{l: l, green: l.green, ctx: l.ctx}
	l.slots.desc = desc
	l.slots.max.Store(DefaultSlots)
	retired := make(chan struct{})
	l.retired.Store(&retired)
	l.slots.at[0].Store(own)
	l.slots.made.Store(1)
	all := []*Slot{own}
	l.slots.all.Store(&all)
	l.slots.free.Store(1)
}

// SetSlots sets how many green contexts each of the partition's layouts may
// hold (callers keeping one current at once), 1 to MaxSlots; call it before
// the partition is shared.
func (p *Partition) SetSlots(n int) {
	n = min(max(n, 1), MaxSlots)
	for _, l := range p.layouts {
		l.slots.max.Store(int32(n))
	}
}

// take takes a free slot unless callers are queued (they come first).
func (q *slots) take() *Slot {
	if q.nq.Load() != 0 {
		return nil
	}
	for {
		f := q.free.Load()
		if f == 0 {
			return nil
		}
		bit := f & -f
		if q.free.CompareAndSwap(f, f&^bit) {
			return q.at[bits.TrailingZeros64(bit)].Load()
		}
	}
}

// takeIdx takes slot i if it is free and no caller is queued.
func (q *slots) takeIdx(i int) bool {
	for {
		f := q.free.Load()
		if q.nq.Load() != 0 || f&(1<<i) == 0 {
			return false
		}
		if q.free.CompareAndSwap(f, f&^(1<<i)) {
			return true
		}
	}
}

// put gives s back: to the longest waiter, or to the free bits.
func (q *slots) put(s *Slot) {
	if q.nq.Load() == 0 {
		q.free.Or(1 << s.idx)
		if q.nq.Load() != 0 {
			q.handoff() // a waiter queued meanwhile and may have missed it
		}
		return
	}
	q.mu.Lock()
	if len(q.q) > 0 {
		w := q.q[0]
		q.q = q.q[1:]
		q.nq.Add(-1)
		q.mu.Unlock()
		w <- s // buffered: never blocks
		return
	}
	q.mu.Unlock()
	q.free.Or(1 << s.idx)
	q.handoff()
}

// handoff gives free slots to the waiters, oldest first. Go's atomics are
// sequentially consistent, so a slot given back as a waiter queues is seen
// by one of the two: put reads the queue after setting the bit, the waiter
// (through handoff) reads the bits after queueing.
func (q *slots) handoff() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.q) > 0 {
		f := q.free.Load()
		if f == 0 {
			return
		}
		bit := f & -f
		if !q.free.CompareAndSwap(f, f&^bit) {
			continue
		}
		w := q.q[0]
		q.q = q.q[1:]
		q.nq.Add(-1)
		w <- q.at[bits.TrailingZeros64(bit)].Load()
	}
}

// enqueue queues a waiter; dequeue takes it out again unless it was served
// (false: a slot is in, or on its way to, w).
func (q *slots) enqueue(w chan *Slot) {
	q.mu.Lock()
	q.q = append(q.q, w)
	q.nq.Add(1)
	q.mu.Unlock()
	q.handoff()
}

func (q *slots) dequeue(w chan *Slot) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if i := slices.Index(q.q, w); i >= 0 {
		q.q = slices.Delete(q.q, i, i+1)
		q.nq.Add(-1)
		return true
	}
	return false
}

// newSlot makes one more green context over the layout's SMs, or returns
// nil when the layout has its limit. The new slot is the caller's.
func (p *Partition) newSlot(l *layout) (*Slot, error) {
	l.slots.grow.Lock()
	defer l.slots.grow.Unlock()
	n := l.slots.made.Load()
	if n >= l.slots.max.Load() {
		return nil, nil
	}
	if p.shut.Load() {
		return nil, ErrClosed
	}
	g, err := p.dev.greenCtx(l.slots.desc, l.gkey)
	if err != nil {
		return nil, err
	}
	ctx, err := p.drv.CtxFromGreenCtx(g)
	if err != nil {
		return nil, errors.Join(err, p.drv.GreenCtxDestroy(g))
	}
	s := &Slot{l: l, idx: int(n), green: g, ctx: ctx, extra: true}
	l.slots.at[n].Store(s)
	all := append(slices.Clone(*l.slots.all.Load()), s)
	l.slots.all.Store(&all)
	l.slots.made.Store(n + 1)
	return s, nil
}

// grow is newSlot for a caller that can wait for a slot: where the pool
// refuses one more green context (its bound on them, or its device memory
// limit: internal/overhead), the layout keeps the slots it has, its limit
// lowered to them, and the caller waits as past any limit. (A warm-up
// calls newSlot, and hears the refusal: it asked for that many.)
func (p *Partition) grow(l *layout) (*Slot, error) {
	s, err := p.newSlot(l)
	if err != nil && (errors.Is(err, errs.ErrGreenContextLimit) || errors.Is(err, errs.ErrQuotaExceeded)) {
		l.slots.max.Store(l.slots.made.Load())
		return nil, nil
	}
	return s, err
}

// TryAcquire takes a free slot of the current layout without waiting, or
// makes one while the layout has fewer than its limit. nil, nil: every
// slot is held or callers are queued for one; the caller checks whether
// it holds one itself (Holding) before it waits (Acquire).
func (p *Partition) TryAcquire() (*Slot, error) {
	for {
		if p.shut.Load() {
			return nil, ErrClosed
		}
		l := p.cur.Load()
		if l.any != nil {
			return l.any, nil // the commons' whole device: shared
		}
		s := l.slots.take()
		if s == nil {
			var err error
			if s, err = p.grow(l); s == nil || err != nil {
				return nil, err
			}
		}
		if s, ok := p.keep(s); ok {
			s.calls.Store(s.calls.Load() + 1) // its holder alone writes it: no locked add
			return s, nil
		} else if s != nil {
			return nil, ErrClosed
		}
	}
}

// keep checks a slot just taken: it goes back if the partition closed
// (ok false, s non-nil) or was reshaped meanwhile (ok false, s nil: try the
// new layout).
func (p *Partition) keep(s *Slot) (*Slot, bool) {
	if p.shut.Load() {
		s.Release()
		return s, false
	}
	if s.l != p.cur.Load() {
		s.Release()
		return nil, false
	}
	return s, true
}

// Acquire takes a slot, waiting in arrival order no longer than ctx when
// every slot is held. The caller must not hold one of this partition's
// slots on the same thread (it would wait for itself): see Holding.
func (p *Partition) Acquire(ctx context.Context) (*Slot, error) {
	if s, err := p.TryAcquire(); s != nil || err != nil {
		return s, err
	}
	start := time.Now()
	w := make(chan *Slot, 1)
	for {
		l := p.cur.Load()
		if p.shut.Load() {
			return nil, ErrClosed
		}
		if l.any != nil {
			return l.any, nil // the layout became the commons' whole device
		}
		s, err := p.grow(l)
		if err != nil {
			return nil, err
		}
		if s == nil {
			l.slots.enqueue(w)
			select {
			case s = <-w:
			case <-ctx.Done():
				err = ctx.Err()
			case <-p.done:
				err = ErrClosed
			case <-*l.retired.Load():
			}
			if s == nil && !l.slots.dequeue(w) {
				s = <-w // served as it left
			}
			if err != nil {
				if s != nil {
					s.Release()
				}
				return nil, err
			}
			if s == nil {
				continue // the layout was retired: wait on the new one
			}
		}
		if s, ok := p.keep(s); ok {
			s.calls.Store(s.calls.Load() + 1) // its holder alone writes it: no locked add
			p.waits.record(time.Since(start))
			return s, nil
		} else if s != nil {
			return nil, ErrClosed
		}
	}
}

// Release gives a slot back. The caller has made another context current
// on its thread first (the slot's may then be made current elsewhere).
func (s *Slot) Release() {
	if s == s.l.any {
		return // shared: nothing to give back
	}
	s.holder.Store(0)
	s.l.slots.put(s)
}

// Holding is the slot of the current layout that thread holds, or nil.
// Slots are written by their holders only, so a thread that finds its own
// id holds that slot.
func (p *Partition) Holding(thread int) *Slot {
	if thread == 0 {
		return nil
	}
	for _, s := range *p.cur.Load().slots.all.Load() { // none on the whole device
		if s.holder.Load() == int64(thread) {
			return s
		}
	}
	return nil
}

// Do runs f with one of the partition's green contexts (a slot), for the
// few driver calls whose result depends on the SMs of the context current
// when they are made (graph instantiation: an executable graph keeps the
// SMs of the context it was instantiated in). On a thread that already
// holds a slot, f gets that one.
func (p *Partition) Do(f func(ctx cuda.Context) error) error {
	if s := p.Holding(threadID()); s != nil {
		return f(s.ctx)
	}
	s, err := p.Acquire(context.Background())
	if err != nil {
		return err
	}
	defer s.Release()
	return f(s.ctx)
}

// letGoSlots lets the green contexts grow made go (the layout's own goes
// with it), as layout.destroy does.
func (l *layout) letGoSlots(d *Device, clean bool) error {
	var errs []error
	for _, s := range *l.slots.all.Load() {
		if s.extra {
			errs = append(errs, d.letGo(s.green, l.gkey, clean))
		}
	}
	return errors.Join(errs...)
}

// WaitStats summarises how long callers waited for a slot. Total and Le
// are a histogram since the partition was made: Le[i] counts the callers
// that waited at most WaitBounds[i], those that found a slot free in every
// bucket (fcsp.WaitStats has the same fields).
type WaitStats struct {
	Calls, Waited uint64
	P50, P99, Max time.Duration
	Total         time.Duration
	Le            [WaitBuckets]uint64
}

// WaitBuckets is how many bounds the waits' histogram has.
const WaitBuckets = 12

// WaitBounds are the histogram's upper bounds: a slot taken at once, a
// green context made or a short Do waited out (tens of microseconds), to
// a queue behind long Dos (a tenth of a second).
var WaitBounds = [WaitBuckets]time.Duration{
	10 * time.Microsecond, 25 * time.Microsecond, 50 * time.Microsecond, 100 * time.Microsecond,
	250 * time.Microsecond, 500 * time.Microsecond, time.Millisecond, 2500 * time.Microsecond,
	5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond, 100 * time.Millisecond,
}

// Slots is how many green contexts the current layout has made.
func (p *Partition) Slots() int { return int(p.cur.Load().slots.made.Load()) }

// Waiting is how many callers are queued for a slot of the current layout
// now.
func (p *Partition) Waiting() int32 { return p.cur.Load().slots.nq.Load() }

// Waits reports the waits for a slot: how many callers took one, how many
// of them waited, and quantiles over all callers (those that found a slot
// free count as 0), the waits being the last waitWindow ones.
func (p *Partition) Waits() WaitStats {
	var calls uint64
	p.mu.Lock()
	for _, l := range p.layouts {
		for _, s := range *l.slots.all.Load() {
			calls += s.calls.Load()
		}
	}
	p.mu.Unlock()
	return p.waits.stats(calls)
}

// waitLog keeps the last waitWindow waits in a ring, written without locks
// (a reader may see an entry mid-update, which at worst shifts a quantile
// by one sample). Only callers that waited write it: a caller that finds a
// slot free counts itself in its slot alone, so concurrent Dos share no
// counter.
type waitLog struct {
	waited atomic.Uint64
	max    atomic.Int64
	ring   [waitWindow]atomic.Int64
	// The histogram: waits by the first bound they are within (the last
	// slot past every bound), and their sum.
	in    [WaitBuckets + 1]atomic.Uint64
	total atomic.Int64

	// The ring sorted, as of sortedWaited waits, at most sortMaxAge old
	// while waits go on: Stats is polled (a scrape, a server's loop) and a
	// copy and sort of the window per call cost 32 KiB of garbage and tens
	// of microseconds.
	mu           sync.Mutex
	sorted       []int64
	sortedWaited uint64
	sortedAt     time.Time
}

const sortMaxAge = time.Millisecond

const waitWindow = 4096

func (w *waitLog) record(d time.Duration) {
	d = max(d, 1)
	b := 0
	for b < WaitBuckets && d > WaitBounds[b] {
		b++
	}
	w.in[b].Add(1)
	w.total.Add(int64(d))
	i := w.waited.Add(1) - 1
	w.ring[i%waitWindow].Store(int64(d))
	for {
		m := w.max.Load()
		if int64(d) <= m || w.max.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

// stats: of calls callers, the waited ones are spread over the top of the
// distribution, the others are zeros: quantile q is 0 below the share that
// did not wait, and the ring's quantile above it.
func (w *waitLog) stats(calls uint64) WaitStats {
	waited := w.waited.Load()
	s := WaitStats{Calls: max(calls, waited), Waited: waited, Max: time.Duration(w.max.Load()), Total: time.Duration(w.total.Load())}
	// Cumulative, the callers that did not wait in every bucket; read
	// without a lock, a count is held to Calls and to the one before it.
	le := s.Calls - waited
	for i := range s.Le {
		le = min(le+w.in[i].Load(), s.Calls)
		s.Le[i] = le
	}
	k := min(waited, waitWindow)
	if k == 0 {
		return s
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sortedWaited != waited && (w.sorted == nil || time.Since(w.sortedAt) >= sortMaxAge) {
		w.sorted = slices.Grow(w.sorted[:0], int(k))[:k]
		for i := range w.sorted {
			w.sorted[i] = w.ring[i].Load()
		}
		slices.Sort(w.sorted)
		w.sortedWaited, w.sortedAt = waited, time.Now()
	}
	v := w.sorted
	k = uint64(len(v))
	frac := float64(waited) / float64(s.Calls)
	at := func(q float64) time.Duration {
		if q <= 1-frac {
			return 0
		}
		r := (q - (1 - frac)) / frac // the quantile among the waits
		return time.Duration(v[min(int(r*float64(k)), int(k)-1)])
	}
	s.P50, s.P99 = at(0.50), at(0.99)
	return s
}

// Owns reports whether c is one of the partition's green contexts (any
// layout's, any slot's).
func (p *Partition) Owns(c cuda.Context) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.layouts {
		for _, s := range *l.slots.all.Load() {
			if s.ctx == c {
				return true
			}
		}
	}
	return false
}

// Limit is how many green contexts the current layout may hold (SetSlots).
func (p *Partition) Limit() int { return int(p.cur.Load().slots.max.Load()) }
