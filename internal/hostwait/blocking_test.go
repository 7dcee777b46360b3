package hostwait

import (
	"errors"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// countingDriver counts the waits a policy chose. Its cuStreamQuery
// answers "not ready" while notReady is above 0, counting it down: work
// outstanding when a wait starts, done when it looks again, whatever the
// machine's load.
type countingDriver struct {
	cuda.Driver
	streamSyncs, eventSyncs, creates atomic.Int32
	queries, notReady                atomic.Int32
	failRecord                       bool
}

func (d *countingDriver) StreamQuery(c cuda.Context, s cuda.Stream) error {
	d.queries.Add(1)
	if d.notReady.Add(-1) >= 0 {
		return cuda.Check("cuStreamQuery", cuda.ErrorNotReady)
	}
	d.notReady.Store(0)
	return d.Driver.StreamQuery(c, s)
}

func (d *countingDriver) StreamSynchronize(c cuda.Context, s cuda.Stream) error {
	d.streamSyncs.Add(1)
	return d.Driver.StreamSynchronize(c, s)
}

func (d *countingDriver) EventSynchronize(c cuda.Context, e cuda.Event) error {
	d.eventSyncs.Add(1)
	return d.Driver.EventSynchronize(c, e)
}

func (d *countingDriver) EventCreate(c cuda.Context, flags uint32) (cuda.Event, error) {
	d.creates.Add(1)
	if flags&cuda.EventBlockingSync == 0 {
		return 0, errors.New("the sleeping wait's event was made without CU_EVENT_BLOCKING_SYNC")
	}
	return d.Driver.EventCreate(c, flags)
}

var errRecord = errors.New("record refused")

func (d *countingDriver) EventRecord(c cuda.Context, e cuda.Event, s cuda.Stream) error {
	if d.failRecord {
		return errRecord
	}
	return d.Driver.EventRecord(c, e, s)
}

// longHistory is a stream whose waits have lasted 2 ms.
func longHistory() *History {
	h := new(History)
	for range 64 {
		h.Add(2 * time.Millisecond)
	}
	return h
}

// A stream whose waits were long sleeps on a blocking-sync event while Go's
// scheduler is busy; one whose waits were short spins in the driver; so do
// a long one on an idle scheduler, a stream with no history, and a pool
// without a Blocker.
func TestAdaptiveSleepsThroughLongWaits(t *testing.T) {
	defer SetSchedBusy(true)()
	fd, ctx, s := openStream(t)
	d := &countingDriver{Driver: fd}
	blk := NewBlocker(d, ctx)
	defer blk.Close()
	w := Adaptive(1000, blk)

	// A long wait with work outstanding sleeps through most of what the
	// stream's waits took (2 ms), then polls: its work done by then, it
	// needs no event.
	d.notReady.Store(1)
	start := time.Now()
	if err := w(d, ctx, s, longHistory(), nil); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 1500*time.Microsecond { // 7/8 of the average, a little under 2 ms
		t.Fatalf("a long wait returned after %v: it did not sleep", el)
	}
	if d.eventSyncs.Load() != 0 || d.streamSyncs.Load() != 0 {
		t.Fatalf("a long wait done when it woke: %d event and %d stream synchronisations; want none", d.eventSyncs.Load(), d.streamSyncs.Load())
	}
	// One that runs well past what was expected sleeps on one event.
	fd.HoldEvents(true)
	released := make(chan struct{})
	go func() { // the work ends once the wait has gone to the event (or after 1 s: the test fails)
		defer close(released)
		for t0 := time.Now(); d.eventSyncs.Load() == 0 && time.Since(t0) < time.Second; {
			time.Sleep(100 * time.Microsecond)
		}
		fd.HoldEvents(false)
	}()
	if err := w(d, ctx, s, longHistory(), nil); err != nil {
		t.Fatal(err)
	}
	<-released
	if d.eventSyncs.Load() != 1 || d.streamSyncs.Load() != 0 {
		t.Fatalf("a long wait past its history: %d event and %d stream synchronisations; want it asleep on one event", d.eventSyncs.Load(), d.streamSyncs.Load())
	}
	for _, h := range []*History{new(History), nil} {
		if err := w(d, ctx, s, h, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := Adaptive(1000, nil)(d, ctx, s, longHistory(), nil); err != nil {
		t.Fatal(err)
	}
	restore := SetSchedBusy(false)
	if err := w(d, ctx, s, longHistory(), nil); err != nil {
		t.Fatal(err)
	}
	restore()
	if d.eventSyncs.Load() != 1 || d.streamSyncs.Load() != 4 {
		t.Fatalf("short, unknown, idle and blocker-less waits: %d event and %d stream synchronisations; want 1 and 4", d.eventSyncs.Load(), d.streamSyncs.Load())
	}
	// A wait a ctx may end polls, long or not.
	fd.HoldEvents(true)
	done := make(chan struct{})
	close(done)
	if err := w(d, ctx, s, longHistory(), done); err != ErrEnded {
		t.Fatalf("a long wait with done: %v, want ErrEnded", err)
	}
	fd.HoldEvents(false)
}

// The average follows the stream: long waits make it sleep, and a few
// short ones bring it back to spinning.
func TestHistoryFollowsTheStream(t *testing.T) {
	h := new(History)
	if h.Long() {
		t.Fatal("a new stream is long")
	}
	h = longHistory()
	if !h.Long() {
		t.Fatalf("after 2 ms waits the average is %v", time.Duration(h.avg.Load()))
	}
	n := 0
	for h.Long() {
		h.Add(30 * time.Microsecond)
		n++
	}
	if n > 8 {
		t.Fatalf("%d short waits to leave the long mode", n)
	}
}

// The Blocker reuses its events, destroys them at Close (the fake counts
// what is live), and refuses waits after; an event a failed record touched
// is destroyed, not reused.
func TestBlockerReusesAndCloses(t *testing.T) {
	fd, ctx, s := openStream(t)
	d := &countingDriver{Driver: fd}
	before := fd.Live().Events
	blk := NewBlocker(d, ctx)
	for range 10 {
		if err := blk.Wait(s); err != nil {
			t.Fatal(err)
		}
	}
	if n := d.creates.Load(); n != 1 {
		t.Fatalf("%d events made for 10 waits one after another", n)
	}
	d.failRecord = true
	if err := blk.Wait(s); !errors.Is(err, errRecord) {
		t.Fatalf("a refused record: %v", err)
	}
	d.failRecord = false
	if n := fd.Live().Events - before; n != 0 {
		t.Fatalf("%d events live after a refused record; want the failed one destroyed", n)
	}
	if err := blk.Wait(s); err != nil {
		t.Fatal(err)
	}
	if err := blk.Close(); err != nil {
		t.Fatal(err)
	}
	if n := fd.Live().Events - before; n != 0 {
		t.Fatalf("%d events live after Close", n)
	}
	if err := blk.Wait(s); !errors.Is(err, ErrClosed) {
		t.Fatalf("a wait after Close: %v, want ErrClosed", err)
	}
}

// Close races waits: every event made is destroyed once both end.
func TestBlockerCloseRacesWaits(t *testing.T) {
	fd, ctx, s := openStream(t)
	before := fd.Live().Events
	blk := NewBlocker(fd, ctx)
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				if err := blk.Wait(s); err != nil {
					if !errors.Is(err, ErrClosed) {
						t.Error(err)
					}
					return
				}
			}
		}()
	}
	time.Sleep(2 * time.Millisecond)
	if err := blk.Close(); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		<-done
	}
	if n := fd.Live().Events - before; n != 0 {
		t.Fatalf("%d events live after Close and the waits ended", n)
	}
}

// A sleeping wait makes no garbage once its event is made.
func TestSleepingWaitMakesNoGarbage(t *testing.T) {
	defer SetSchedBusy(true)()
	fd, ctx, s := openStream(t)
	blk := NewBlocker(fd, ctx)
	defer blk.Close()
	w, h := Adaptive(1000, blk), longHistory()
	if err := w(fd, ctx, s, h, nil); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		h.avg.Store(int64(2 * time.Millisecond))
		if err := w(fd, ctx, s, h, nil); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per sleeping wait", n)
	}
}

// The scheduler's load is read from runtime/metrics (a name this Go lacks
// would read as idle forever) and cached for a millisecond.
func TestSchedLoadReads(t *testing.T) {
	var l schedLoad
	now := time.Now()
	l.busy(now)
	for i, smp := range l.s {
		if smp.Value.Kind() != metrics.KindUint64 {
			t.Fatalf("metric %d %q: kind %v; this Go does not have it", i, smp.Name, smp.Value.Kind())
		}
	}
	if procs := l.s[2].Value.Uint64(); procs != uint64(runtime.GOMAXPROCS(0)) {
		t.Fatalf("gomaxprocs read %d, want %d", procs, runtime.GOMAXPROCS(0))
	}
	at := l.at.Load()
	l.busy(now.Add(time.Microsecond))
	if l.at.Load() != at {
		t.Fatal("read again within a millisecond")
	}
	l.busy(now.Add(2 * time.Millisecond))
	if l.at.Load() == at {
		t.Fatal("not read again after a millisecond")
	}
	if n := testing.AllocsPerRun(100, func() { now = now.Add(2 * time.Millisecond); l.busy(now) }); n != 0 {
		t.Fatalf("%v allocations per read", n)
	}
}
