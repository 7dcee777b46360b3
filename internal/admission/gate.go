package admission

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/stream"
	"github.com/fcsp-go/fcsp-go/tokenbucket"
)

// Gate is one stream's admission, made once with the stream (Init): its
// bucket of the tenant's limiter (nil: its work is admitted free, the
// tenant not limited or its class bypassing the limit) and its meter (nil:
// untimed). The zero Gate admits everything at once.
type Gate struct {
	t      *Tenant
	class  stream.Class
	closed *atomic.Bool // the stream's Close began
	bucket *tokenbucket.Stream
	meter  *meter
	free   bool // neither: the caller may skip admission (Free)
}

// Init makes g the gate of a stream of class cl whose handle hv holds
// and whose Close sets closed.
func (t *Tenant) Init(g *Gate, cl stream.Class, hv *atomic.Uintptr, closed *atomic.Bool) error {
	*g = Gate{t: t, class: cl, closed: closed}
	b, err := t.price.stream(cl)
	if err != nil {
		return err
	}
	g.bucket = b
	if t.cfg.Metered {
		m := &meter{t: t, class: cl, hv: hv, sclosed: closed, bucket: b}
		if t.cfg.Latency {
			m.lat = t.pool
			t.pool.add(m)
		}
		t.listMeter(m, true)
		g.meter = m
	}
	g.free = g.bucket == nil && g.meter == nil
	return nil
}

// Free reports whether the gate admits everything untimed (an unlimited,
// unmetered stream's): the caller skips admission, which then costs one
// load.
func (g *Gate) Free() bool { return g.free }

// Listed reports whether g's meter went on its tenant's list (and a
// latency tenant's on its pool's). A poll may still walk a copy of such a
// list after Close took it off; the collector takes such a gate.
func (g *Gate) Listed() bool { return g.meter != nil }

// Admit charges a launch of w, waiting while the buckets are empty. It
// fails at once, charging nothing, when ctx's deadline falls before the
// tokens are due (an error matching context.DeadlineExceeded), and returns
// ErrClosed when the stream or tenant is, or gets, closed while waiting. A
// metered gate first folds in what completed. The caller is in the life
// lock, and gives *tk zero.
func (g *Gate) Admit(ctx context.Context, w *Work, tk *Ticket) error {
	_, err := g.admit(ctx, await, launchJob(g.class, w), w, tk, true)
	return err
}

// TryAdmit is Admit without waiting: ErrThrottled, charging nothing, when
// the buckets do not hold the launch's cost now.
func (g *Gate) TryAdmit(w *Work, tk *Ticket) error {
	_, err := g.admit(context.Background(), now, launchJob(g.class, w), w, tk, true)
	if err == errs.ErrThrottled && g.closed.Load() {
		return errs.ErrClosed
	}
	return err
}

// Reserve charges a launch of w now, going into debt if the buckets do
// not hold it. The caller is not in the life lock.
func (g *Gate) Reserve(w *Work) (Reservation, error) {
	var rv Reservation
	r, err := g.admit(context.Background(), ahead, launchJob(g.class, w), w, &rv.tk, true)
	if err != nil {
		return Reservation{}, err
	}
	rv.r = r
	return rv, nil
}

// AdmitGraph charges a graph launch, waiting: its fixed cost if set, else
// as its tenant's limit prices it (under a GPU share its predicted GPU
// time, corrected when measured; under a launch-rate limit its kernels').
// The caller is in the life lock; timed says whether a metered gate is to
// time it (a graph launched into a capture runs later, untimed).
func (g *Gate) AdmitGraph(ctx context.Context, w Graph, timed bool) (Ticket, error) {
	var tk Ticket
	j := job{class: g.class, threads: kernelThreads(w.Kernels), est: w.Est, fixed: w.Fixed}
	_, err := g.admit(ctx, await, j, nil, &tk, timed)
	return tk, err
}

// admit is every entry point's path: it opens *tk for j, a launch of w
// (nil: a graph), then charges the bucket as how says. A timed ticket
// (a metered gate's, unless !timed) carries j's estimate, which a metered
// gate looks up for a launch, and first folds in what completed. On error
// *tk is zero.
func (g *Gate) admit(ctx context.Context, how take, j job, w *Work, tk *Ticket, timed bool) (*tokenbucket.Reservation, error) {
	tk.g = g
	if g.meter != nil && timed {
		if w != nil {
			j.est, tk.bytes = w.Ests.For(w.Grid, w.Block), w.Bytes.Load()
		}
		tk.est, tk.timed = j.est, true
		if err := g.poll(how); err != nil {
			*tk = Ticket{}
			return nil, err
		}
		// The queue bound (queue.go); a reservation's is applied when it
		// is waited for (Reservation.Wait).
		if h := g.t.horizon.Load(); h > 0 && how != ahead {
			q, lead, err := g.t.enqueue(ctx, h, j.est.orZero(), how, true)
			if err != nil {
				*tk = Ticket{}
				return nil, err
			}
			tk.q, tk.lead = q, lead
		}
	}
	if g.bucket == nil {
		return nil, nil // admitted free
	}
	r, err := g.t.charge(ctx, how, g.bucket, j, &tk.c)
	if err != nil {
		g.t.dequeue(tk.q)
		*tk = Ticket{}
	}
	return r, err
}

// poll folds in what completed on g's stream. An admission's caller is in
// the tenant's life lock, a reservation's (ahead) is not: it is entered
// for the poll.
func (g *Gate) poll(how take) error {
	if how == ahead {
		return g.t.do(g.meter.poll)
	}
	return g.meter.poll(g.t.cfg.Primary())
}

// Rate is the launch-rate price on the gate of a graph of these kernels,
// each priced as a launch of it; 0 when the tenant's limit is not the
// launch rate.
func (g *Gate) Rate(kernels []Shape) float64 { return g.t.price.rate(g.class, kernelThreads(kernels)) }

// AddTo adds g's figures to s.
func (g *Gate) AddTo(s *GateSums) {
	if g.bucket != nil {
		bs := g.bucket.Stats()
		s.throttled += bs.Throttled
		s.wait += time.Duration(bs.WaitNanos)
	}
	if m := g.meter; m != nil {
		m.mu.Lock()
		s.bw.add(&m.bw)
		m.mu.Unlock()
	}
}

// AfterSync folds a latency stream's completed work in after its
// Synchronize, so its neighbours are released at once rather than at its
// next launch.
func (g *Gate) AfterSync() {
	if m := g.meter; m != nil && m.lat != nil {
		_ = g.t.do(m.poll)
	}
}

// Close folds in what completed (the stream was synchronised), destroys
// the stream's events in ctx, and closes its bucket.
func (g *Gate) Close(ctx cuda.Context) error {
	var errs []error
	if g.bucket != nil {
		errs = append(errs, g.bucket.Close())
	}
	if g.meter != nil {
		errs = append(errs, g.meter.close(ctx))
	}
	return errors.Join(errs...)
}
