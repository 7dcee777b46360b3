package hostwait

import (
	"testing"
	"time"
)

// Issue 39 #15: the sleeping wait asks the stream before it sleeps. One
// with nothing left to do returns at once (it slept 7/8 of a 40 ms history
// before: 34.5 ms), and its non-wait does not pull the stream's history
// down; one with work outstanding still sleeps.
func TestSleepingWaitQueriesFirst(t *testing.T) {
	defer SetSchedBusy(true)()
	fd, ctx, s := openStream(t)
	d := &countingDriver{Driver: fd}
	blk := NewBlocker(d, ctx)
	defer blk.Close()
	w := Adaptive(1000, blk)

	h := new(History)
	h.avg.Store(int64(400 * time.Millisecond))
	start := time.Now()
	if err := w(d, ctx, s, h, nil); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 100*time.Millisecond { // it slept 350 ms before
		t.Fatalf("a wait for a stream with nothing to do took %v: it slept before asking", el)
	}
	if got := time.Duration(h.avg.Load()); got != 400*time.Millisecond {
		t.Fatalf("history %v after a wait that found nothing to wait for; want it kept at 400ms", got)
	}
	if d.eventSyncs.Load() != 0 || d.streamSyncs.Load() != 0 {
		t.Fatalf("%d event and %d stream synchronisations for a done stream", d.eventSyncs.Load(), d.streamSyncs.Load())
	}

	// Work outstanding at the first query: it sleeps most of the 2 ms the
	// stream's waits took, and the second query finds it done.
	d.notReady.Store(1)
	d.queries.Store(0)
	start = time.Now()
	if err := w(d, ctx, s, longHistory(), nil); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 1500*time.Microsecond {
		t.Fatalf("a wait with work outstanding returned after %v: it did not sleep", el)
	}
	if d.queries.Load() != 2 || d.eventSyncs.Load() != 0 {
		t.Fatalf("%d queries and %d event synchronisations; want 2 queries around one sleep", d.queries.Load(), d.eventSyncs.Load())
	}
}
