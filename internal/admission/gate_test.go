package admission

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/stream"
)

// events is a driver of events whose completion and elapsed time the test
// sets: every recorded end event completes when done is set, after ms.
type events struct {
	mu      sync.Mutex
	next    cuda.Event
	live    map[cuda.Event]bool
	done    bool
	ms      float32
	failRec bool
}

func (e *events) EventCreate(cuda.Context, uint32) (cuda.Event, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.next++
	if e.live == nil {
		e.live = map[cuda.Event]bool{}
	}
	e.live[e.next] = true
	return e.next, nil
}

func (e *events) EventRecord(cuda.Context, cuda.Event, cuda.Stream) error {
	if e.failRec {
		return errors.New("record refused")
	}
	return nil
}

func (e *events) EventQuery(cuda.Context, cuda.Event) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.done {
		return cuda.ErrorNotReady
	}
	return nil
}

func (e *events) EventElapsedMs(cuda.Context, cuda.Event, cuda.Event) (float32, error) {
	return e.ms, nil
}

func (e *events) EventDestroy(_ cuda.Context, ev cuda.Event) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.live, ev)
	return nil
}

// gate makes a tenant of cfg (frozen clock: nothing refills) and the gate
// of one Default stream.
func gate(t *testing.T, ev *events, cfg Config) (*Tenant, *Gate) {
	t.Helper()
	cfg.Events, cfg.Clock = ev, func() int64 { return 1 }
	cfg.Host = new(host)
	tn, err := NewTenant(new(Pool), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var g Gate
	var hv atomic.Uintptr
	var sclosed atomic.Bool
	if err := tn.Init(&g, stream.Default, &hv, &sclosed); err != nil {
		t.Fatal(err)
	}
	return tn, &g
}

// host is an open tenant that admits every call.
type host struct{ closed atomic.Bool }

func (h *host) Enter() (uint32, error)  { return 0, nil }
func (h *host) Exit(uint32)             {}
func (h *host) Closed() bool            { return h.closed.Load() }
func (h *host) Primary() cuda.Context   { return 0 }
func (h *host) AnyThread() cuda.Context { return 0 }
func (h *host) Log(string)              {}

var noBytes atomic.Uint64

// queued stands for work queued without error between a ticket's events.
func queued() error { return nil }

func ptr(w Work) *Work { return &w }

func tryAdmit(g *Gate, es *Estimates) (Ticket, error) {
	w := work(es)
	var tk Ticket
	err := g.TryAdmit(&w, &tk)
	return tk, err
}

func work(es *Estimates) Work {
	return Work{Grid: cuda.Dim3{X: 1, Y: 1, Z: 1}, Block: cuda.Dim3{X: 32, Y: 1, Z: 1}, Ests: es, Bytes: &noBytes}
}

// An unlimited, unmetered gate admits at once, untimed, allocating
// nothing: Launch on such a stream must not pay for admission.
func TestUnlimitedGateCostsNothing(t *testing.T) {
	_, g := gate(t, new(events), Config{})
	var es Estimates
	allocs := testing.AllocsPerRun(100, func() {
		var tk Ticket
		w := work(&es)
		err := g.Admit(context.Background(), &w, &tk)
		if err != nil || tk.Timed() {
			t.Fatalf("Admit = %v, timed %v", err, tk.Timed())
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per Admit", allocs)
	}
}

// Under a GPU share, a ticket is charged a whole refill period before its
// work was ever measured, and settled with the measured time: the bucket
// gets the difference back, and the next launch is priced by the estimate.
func TestTicketSettlesWithTheMeasuredCost(t *testing.T) {
	ev := new(events)
	tn, g := gate(t, ev, Config{GPUShare: 0.5, Metered: true, Refill: time.Millisecond})
	var es Estimates
	tk, err := tryAdmit(g, &es)
	if err != nil || !tk.Timed() {
		t.Fatalf("TryAdmit = %v, timed %v", err, tk.Timed())
	}
	if err := tk.Time(0, queued); err != nil {
		t.Fatal(err)
	}
	if _, err := tryAdmit(g, &es); !errors.Is(err, errs.ErrThrottled) {
		t.Fatalf("second launch before the first is measured: %v, want ErrThrottled", err)
	}
	ev.mu.Lock()
	ev.done, ev.ms = true, 1.0/64 // 15.625 us, exact in a float32
	ev.mu.Unlock()
	if got := gateStats(tn, g).GPUTime; got != 15625*time.Nanosecond {
		t.Fatalf("GPU time %v, want 15.625us", got)
	}
	if got := es.For(cuda.Dim3{X: 1, Y: 1, Z: 1}, cuda.Dim3{X: 32, Y: 1, Z: 1}).get(); got != 15625 {
		t.Fatalf("estimate %v ns, want 15625", got)
	}
	tk, err = tryAdmit(g, &es)
	if err != nil {
		t.Fatalf("after the settlement: %v", err)
	}
	tk.Cancel()
}

// Work that failed to be queued gives its charge back, as a cancelled
// ticket does.
func TestFailedWorkGivesItsChargeBack(t *testing.T) {
	ev := new(events)
	_, g := gate(t, ev, Config{GPUShare: 0.5, Metered: true, Refill: time.Millisecond})
	var es Estimates
	for i := range 3 {
		tk, err := tryAdmit(g, &es)
		if err != nil {
			t.Fatalf("launch %d: %v (a failed launch kept its charge)", i, err)
		}
		if err := tk.Time(0, func() error { return errors.New("launch failed") }); err == nil {
			t.Fatal("Time hid the launch's error")
		}
	}
	ev.failRec = true
	tk, err := tryAdmit(g, &es)
	if err != nil {
		t.Fatal(err)
	}
	if err := tk.Time(0, func() error { t.Fatal("queued after its start event failed"); return nil }); err == nil {
		t.Fatal("Time hid the record's error")
	}
	if _, err := tryAdmit(g, &es); err != nil {
		t.Fatalf("after a failed start event: %v (its charge was kept)", err)
	}
}

// Closing the gate destroys every event it made, and a Reservation's
// ticket charges as Reserve did.
func TestCloseDestroysEventsAndReservationCancels(t *testing.T) {
	ev := new(events)
	_, g := gate(t, ev, Config{GPUShare: 0.5, Metered: true, Refill: time.Millisecond})
	var es Estimates
	r, err := g.Reserve(ptr(work(&es)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tryAdmit(g, &es); !errors.Is(err, errs.ErrThrottled) {
		t.Fatalf("Reserve charged nothing: %v", err)
	}
	r.Cancel()
	tk, err := tryAdmit(g, &es)
	if err != nil {
		t.Fatalf("after Cancel: %v", err)
	}
	if err := tk.Time(0, queued); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(0); err != nil {
		t.Fatal(err)
	}
	if n := len(ev.live); n != 0 {
		t.Fatalf("%d events left after Close", n)
	}
}

// gateStats is tn's Stats over the one gate g.
func gateStats(tn *Tenant, g *Gate) Stats {
	var sums GateSums
	g.AddTo(&sums)
	return tn.Stats(&sums)
}

// Plain tenants of a pool share one engine, which holds none of their
// hosts (the first tenant's host would otherwise be kept for the pool's
// life); every tenant that asks for anything gets its own. A plain
// engine's gates are free, its Stats are zero, and closing it for one
// tenant leaves the others' gates free.
func TestPlainTenantsShareOneEngine(t *testing.T) {
	var pp Pool
	ev := new(events)
	a, err := NewTenant(&pp, Config{Events: ev, Host: new(host), SMs: 16, Partitioned: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewTenant(&pp, Config{Events: ev, Host: new(host), SMs: 132})
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatal("two plain tenants of a pool got two engines")
	}
	if a.cfg.Host != nil {
		t.Fatal("the shared plain engine holds a tenant's host")
	}
	for _, cfg := range []Config{
		{SMLimit: 0.5, SMs: 16, ThreadsPerSM: 2048},
		{GPUShare: 0.5},
		{Metered: true},
		{Latency: true},
		{Floor: 0.25},
	} {
		cfg.Events, cfg.Host, cfg.Clock = ev, new(host), func() int64 { return 1 }
		own, err := NewTenant(&pp, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if own == a {
			t.Fatalf("%+v shares the plain engine", cfg)
		}
	}
	var g Gate
	var hv atomic.Uintptr
	var closed atomic.Bool
	if err := a.Init(&g, stream.Default, &hv, &closed); err != nil {
		t.Fatal(err)
	}
	b.Close() // one plain tenant closing
	if !g.Free() {
		t.Fatal("a plain tenant's gate is not free")
	}
	var sums GateSums
	g.AddTo(&sums)
	if s := a.Stats(&sums); s.Throttled != 0 || s.SMLimit != 0 || s.GPUTimeByClass != nil || s.Floored != 0 || s.Bytes != 0 {
		t.Fatalf("a plain engine's figures: %+v", s)
	}
	if a.Limited() || a.Metered() {
		t.Fatal("the plain engine claims a limit or a meter")
	}
}

// Time holds the stream's meter across the caller's queue, and only
// then: no other timed work on the stream comes between a ticket's two
// events.
func TestTimeHoldsTheMeterAcrossQueue(t *testing.T) {
	_, g := gate(t, new(events), Config{Metered: true})
	var es Estimates
	var tk Ticket
	w := work(&es)
	if err := g.Admit(context.Background(), &w, &tk); err != nil || !tk.Timed() {
		t.Fatalf("Admit = %v, timed %v", err, tk.Timed())
	}
	held := false
	if err := tk.Time(0, func() error { held = !g.meter.mu.TryLock(); return nil }); err != nil {
		t.Fatal(err)
	}
	if !held {
		t.Fatal("queue ran without the stream's meter held")
	}
	if !g.meter.mu.TryLock() {
		t.Fatal("the stream's meter still held after Time")
	}
	g.meter.mu.Unlock()
}

// Timed launches from several goroutines on one limited, metered stream,
// polls and Stats meanwhile, then Close: every launch is admitted, timed
// and folded in, and Close destroys every event (run with -race).
func TestTimedLaunchesRacePollsAndClose(t *testing.T) {
	ev := new(events)
	ev.done, ev.ms = true, 0.001
	tn, err := NewTenant(new(Pool), Config{GPUShare: 0.5, Latency: true, Refill: time.Millisecond, Events: ev, Host: new(host)}) // the real clock
	if err != nil {
		t.Fatal(err)
	}
	g := new(Gate)
	var hv atomic.Uintptr
	var sclosed atomic.Bool
	if err := tn.Init(g, stream.Default, &hv, &sclosed); err != nil {
		t.Fatal(err)
	}
	var es Estimates
	var wg sync.WaitGroup
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				_ = tn.Poll()
				_ = gateStats(tn, g)
			}
		}
	}()
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				var tk Ticket
				w := work(&es)
				if err := g.Admit(context.Background(), &w, &tk); err != nil {
					t.Error(err)
					return
				}
				if err := tk.Time(0, queued); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := g.Close(0); err != nil {
		t.Fatal(err)
	}
	if s := gateStats(tn, g); s.GPUTime != 400*time.Microsecond {
		t.Fatalf("GPU time %v, want 400 launches of 1us", s.GPUTime)
	}
	if n := len(ev.live); n != 0 {
		t.Fatalf("%d events left after Close", n)
	}
}
