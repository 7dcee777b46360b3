package admission

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/stream"
)

// A reservation's ticket whose launch never ran gives back what Reserve
// took, under a launch-rate limit as under a GPU share: every charge
// keeps what it took (charge), where a launch-rate ticket kept nothing
// and its Cancel gave nothing back.
func TestCancelledReservationGivesBackALaunchRateCharge(t *testing.T) {
	_, g := gate(t, new(events), Config{SMLimit: 0.5, SMs: 1, ThreadsPerSM: 64, Refill: time.Millisecond})
	var es Estimates
	w := work(&es) // 32 threads: the bucket (32 tokens at 0.5) holds one
	r, err := g.Reserve(&w)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := r.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tryAdmit(g, &es); !errors.Is(err, errs.ErrThrottled) {
		t.Fatalf("a second launch beside the reservation: %v, want ErrThrottled", err)
	}
	tk.Cancel() // the reserved launch failed to be queued
	if _, err := tryAdmit(g, &es); err != nil {
		t.Fatalf("after the ticket's Cancel: %v (its charge was kept)", err)
	}
}

// A launch that waited at the floor and was admitted at its full share
// when the latency tenants went idle counts as throttled, once: the wait
// the idle latency tenants cut short was not counted before.
func TestFloorWaitCountsOnce(t *testing.T) {
	ev := new(events)
	var pp Pool
	clock := func() int64 { return 1 } // frozen: nothing refills
	lat, err := NewTenant(&pp, Config{Latency: true, Metered: true, Events: ev, Host: new(host), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	fl, err := NewTenant(&pp, Config{GPUShare: 1, Floor: 0.5, Metered: true, Events: ev, Host: new(host), Clock: clock, Refill: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var lg, fg Gate
	var hv atomic.Uintptr
	var lclosed, fclosed atomic.Bool
	if err := lat.Init(&lg, stream.Default, &hv, &lclosed); err != nil {
		t.Fatal(err)
	}
	if err := fl.Init(&fg, stream.Default, &hv, &fclosed); err != nil {
		t.Fatal(err)
	}
	// The latency tenant's launch is in flight.
	var les, fes Estimates
	var ltk Ticket
	lw := work(&les)
	if err := lg.Admit(context.Background(), &lw, &ltk); err != nil {
		t.Fatal(err)
	}
	if err := ltk.Time(0, queued); err != nil {
		t.Fatal(err)
	}
	if !pp.LatencyBusy() {
		t.Fatal("the latency tenant's launch in flight is not counted")
	}
	// At the floor a launch never measured costs twice a refill period:
	// more than the bucket holds. The first goes through on credit, the
	// second waits.
	var tk Ticket
	fw := work(&fes)
	if err := fg.Admit(context.Background(), &fw, &tk); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		var tk Ticket
		fw := work(&fes)
		done <- fg.Admit(context.Background(), &fw, &tk)
	}()
	time.Sleep(5 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("admitted at the floor with the bucket short: %v", err)
	default:
	}
	ev.mu.Lock()
	ev.done = true
	ev.mu.Unlock()
	lg.AfterSync() // the latency tenant sees its launch complete
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the floored launch was not admitted when the latency tenant went idle")
	}
	if s := gateStats(fl, &fg); s.Throttled != 1 || s.Floored != 1 {
		t.Fatalf("Throttled %d, Floored %d; want 1 (the second waited) and 1 (the first was admitted at the floor, the second at its full share)", s.Throttled, s.Floored)
	}
}
