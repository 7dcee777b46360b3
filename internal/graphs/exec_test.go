package graphs

import (
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
)

// in makes every call in ctx, as a tenant's green context would.
func in(ctx cuda.Context) Do {
	return func(f func(cuda.Context) error) error { return f(ctx) }
}

func live(t *testing.T, d interface{ Graphs() (int, int) }, graphs, execs int) {
	t.Helper()
	if g, e := d.Graphs(); g != graphs || e != execs {
		t.Fatalf("%d graphs and %d execs live; want %d and %d", g, e, graphs, execs)
	}
}

var one = cuda.Dim3{X: 1, Y: 1, Z: 1}

// A capture keeps what f queued, with the kernels noted meanwhile and the
// layout; one whose f fails or panics is ended and discarded (the stream
// can be captured again), and f's error is returned as it is.
func TestCaptureKeepsOrDiscards(t *testing.T) {
	drv, ctx, s := setUp(t)
	gs := New(drv)
	var slot atomic.Pointer[Recording]
	if slot.Load().Record(one, one) {
		t.Fatal("a stream not capturing recorded a launch")
	}
	rec := new(Recording)
	slot.Store(rec)
	var g Graph
	err := gs.Capture(&g, in(ctx), s, rec, 7, func() error {
		if !slot.Load().Record(one, one) || !slot.Load().Record(one, cuda.Dim3{X: 32, Y: 1, Z: 1}) {
			t.Error("a capturing stream did not record a launch")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if g.Kernels() != 2 || g.layout != 7 {
		t.Fatalf("graph of %d kernels, layout %d; want 2, 7", g.Kernels(), g.layout)
	}
	live(t, drv, 1, 0)

	boom := errors.New("boom")
	var failed Graph
	if err := gs.Capture(&failed, in(ctx), s, new(Recording), 7, func() error { return boom }); !errors.Is(err, boom) || err.Error() != "boom" {
		t.Fatalf("f's error came back as %v", err)
	}
	live(t, drv, 1, 0)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("f's panic did not reach the caller")
			}
		}()
		_ = gs.Capture(&failed, in(ctx), s, new(Recording), 7, func() error { panic("f") })
	}()
	live(t, drv, 1, 0)
	// The stream is not left capturing: it can be captured again.
	var again Graph
	if err := gs.Capture(&again, in(ctx), s, new(Recording), 7, func() error { return nil }); err != nil {
		t.Fatalf("after a failed and a panicking capture: %v", err)
	}
	live(t, drv, 2, 0)
	// A capture that cannot begin answers the refusal as it is (fcsp, the
	// face, names the tenant), and f does not run.
	refused := func(func(cuda.Context) error) error { return errs.ErrClosed }
	err = gs.Capture(&failed, refused, s, new(Recording), 7, func() error {
		t.Error("f ran without a capture")
		return nil
	})
	if err != errs.ErrClosed {
		t.Fatalf("begin refused: %v", err)
	}
}

// A graph instantiates into an exec with its kernels and layout until it
// is closed; Close destroys once, and a Close its tenant refuses (closed)
// leaves the graph to the set's Close.
func TestGraphInstantiateAndClose(t *testing.T) {
	drv, ctx, s := setUp(t)
	gs := New(drv)
	rec := new(Recording)
	rec.record(one, one)
	var g Graph
	if err := gs.Capture(&g, in(ctx), s, rec, 3, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	var e Exec
	if err := g.Instantiate(&e, in(ctx)); err != nil {
		t.Fatal(err)
	}
	if e.Kernels() != 1 || e.Layout() != 3 {
		t.Fatalf("exec of %d kernels, layout %d; want 1, 3", e.Kernels(), e.Layout())
	}
	live(t, drv, 1, 1)
	var e2 Exec
	refused := func(func(cuda.Context) error) error { return errs.ErrClosed }
	if err := g.Instantiate(&e2, refused); err != errs.ErrClosed {
		t.Fatalf("instantiation refused: %v", err)
	}
	for range 2 {
		if err := g.Close(in(ctx)); err != nil {
			t.Fatal(err)
		}
	}
	live(t, drv, 0, 1)
	if err := g.Instantiate(&e2, in(ctx)); !errors.Is(err, errs.ErrClosed) {
		t.Fatalf("Instantiate after Close: %v", err)
	}
	// The exec outlives its graph, and a Close refused leaves it listed.
	if err := e.Launch(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(refused); err != nil {
		t.Fatalf("Close refused by a closed tenant: %v, want nil", err)
	}
	live(t, drv, 0, 1)
	if err := e.Enter(); !errors.Is(err, errs.ErrClosed) {
		t.Fatalf("Enter after Close: %v", err)
	}
	if err := gs.Close(ctx); err != nil {
		t.Fatal(err)
	}
	live(t, drv, 0, 0)
}

// SetCost takes a finite number of tokens, 0 or more, which the launch's
// work carries; anything else is an invalid argument and leaves the cost.
func TestExecSetCost(t *testing.T) {
	var e Exec
	if w := e.Work(); w.Fixed != 0 || w.Est != &e.est {
		t.Fatalf("zero exec's work %+v", w)
	}
	if err := e.SetCost(5); err != nil || e.Work().Fixed != 5 {
		t.Fatalf("SetCost(5) = %v, fixed %v", err, e.Work().Fixed)
	}
	for _, bad := range []float64{-1, math.NaN(), math.Inf(1), math.Inf(-1)} {
		if err := e.SetCost(bad); !errors.Is(err, errs.ErrInvalidArgument) {
			t.Fatalf("SetCost(%v) = %v", bad, err)
		}
	}
	if e.Work().Fixed != 5 {
		t.Fatalf("a refused cost changed it to %v", e.Work().Fixed)
	}
}

// Close waits for launches between Enter and Exit, and later launches are
// refused: the handle is never destroyed under a launch.
func TestExecCloseWaitsForLaunches(t *testing.T) {
	drv, ctx, s := setUp(t)
	gs := New(drv)
	var g Graph
	if err := gs.Capture(&g, in(ctx), s, new(Recording), 0, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	var e Exec
	if err := g.Instantiate(&e, in(ctx)); err != nil {
		t.Fatal(err)
	}
	if err := e.Enter(); err != nil {
		t.Fatal(err)
	}
	var launched atomic.Bool
	closed := make(chan error)
	go func() {
		closed <- e.Close(func(f func(cuda.Context) error) error {
			if !launched.Load() {
				t.Error("destroyed while a launch was under way")
			}
			return f(ctx)
		})
	}()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a launch was under way", err)
	case <-time.After(10 * time.Millisecond):
	}
	if err := e.Launch(ctx, s); err != nil {
		t.Fatal(err)
	}
	launched.Store(true)
	e.Exit()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if err := e.Enter(); !errors.Is(err, errs.ErrClosed) {
		t.Fatalf("Enter after Close: %v", err)
	}
	live(t, drv, 1, 0)
}
