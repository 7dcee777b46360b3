package admission

import (
	"context"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/tokenbucket"
)

// Ticket is admitted work: what was charged, and how to settle or undo it.
// A Ticket is a value: admitting one allocates nothing. The zero Ticket
// is admitted, untimed work with nothing to settle.
type Ticket struct {
	g     *Gate
	c     charge
	est   *Estimate
	bytes uint64
	q     float64 // charged to the queue bound's prediction (queue.go); 0: none
	lead  float64 // its lead there, kept less the corrections then (queue.go, own)
	timed bool    // to be queued by Time, and settled when measured
}

// Timed reports whether the work is to be queued through Time.
func (tk *Ticket) Timed() bool { return tk.timed }

// Time queues timed work (queue) between two events recorded in ctx on the
// ticket's stream, and leaves the ticket to be settled when the second is
// seen complete. It holds the stream's meter from the first event to the
// second, across queue, so that no other timed work on the stream comes
// between them; queue must queue the work and nothing else (it must not
// admit or time other work on the stream). If the work could not be timed
// or queued the ticket's charge is given back and the error returned.
func (tk *Ticket) Time(ctx cuda.Context, queue func() error) error {
	m := tk.g.meter
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.pending) > 0 {
		tk.lead = behind // its start event waits for the stream's work ahead (own)
	}
	start, err := m.record(ctx)
	if err != nil {
		tk.Cancel()
		return err
	}
	var end cuda.Event
	if err = queue(); err == nil {
		end, err = m.record(ctx)
	}
	if err != nil {
		m.free = append(m.free, start)
		tk.Cancel()
		return err
	}
	m.pending = append(m.pending, timed{start: start, end: end, est: tk.est, c: tk.c, in: m.open, bytes: tk.bytes, q: tk.q, lead: tk.lead})
	if tk.q != 0 {
		tk.g.t.land() // in the meter now, which a look sees
		tk.q = 0      // the pending entry carries the charge
	}
	m.markBusy() // a latency stream's work in flight counts
	return nil
}

// Drop gives back the ticket's charge to the tenant's queue bound only:
// its work will not run, and its stream closed while it waited, so its
// tokens are not given back (the gate may serve another stream by now).
func (tk *Ticket) Drop() {
	if tk.q != 0 {
		tk.g.t.dequeue(tk.q)
		tk.q = 0
	}
}

// Cancel gives back what the ticket charged: its work did not run.
func (tk *Ticket) Cancel() {
	if tk.c.total() > 0 {
		tk.c.cancel(tk.g.bucket)
	}
	tk.Drop()
}

// Reservation is a launch admitted ahead of time (Reserve).
type Reservation struct {
	tk Ticket
	r  *tokenbucket.Reservation // nil: admitted free
}

// Delay is how long from now until the reservation may run.
func (r *Reservation) Delay() time.Duration {
	if r.r == nil {
		return 0
	}
	return r.r.Delay()
}

// Cancel gives back what Reserve took, unless it was used or cancelled.
func (r *Reservation) Cancel() {
	if r.r != nil {
		r.r.Cancel()
	}
}

// Wait waits until the reservation is due, and under a queue bound until
// the tenant's queue has room (queue.go), and returns its ticket; on error
// the reservation is cancelled. The caller is not in the life lock.
func (r *Reservation) Wait(ctx context.Context) (Ticket, error) {
	if r.r != nil {
		if err := r.r.Wait(ctx); err != nil {
			return Ticket{}, err
		}
	}
	if tk := &r.tk; tk.timed {
		if h := tk.g.t.horizon.Load(); h > 0 {
			q, lead, err := tk.g.t.enqueue(ctx, h, tk.est.orZero(), await, false)
			if err != nil {
				tk.Cancel()
				return Ticket{}, err
			}
			tk.q, tk.lead = q, lead
		}
	}
	return r.tk, nil
}
