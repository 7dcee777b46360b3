package fault

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// lostErr stands for fcsp's *DeviceLostError.
type lostErr struct{ Record }

func (e *lostErr) Error() string { return "lost: " + e.Err.Error() }

func newState(whose string) *State {
	return &State{
		Public: func(r Record) error { return &lostErr{r} },
		Whose:  func(cuda.Context, cuda.Stream) string { return whose },
		Log:    slog.New(slog.DiscardHandler),
	}
}

var (
	illegal  = &cuda.Error{Op: "cuStreamSynchronize", Code: cuda.ErrorIllegalAddress}
	invalid  = &cuda.Error{Op: "cuStreamDestroy_v2", Code: cuda.ErrorInvalidHandle}
	notReady = &cuda.Error{Op: "cuStreamQuery", Code: cuda.ErrorNotReady}
)

func TestSeePassesWhatIsNotSticky(t *testing.T) {
	f := newState("a")
	if err := f.See("cuLaunchKernel", 0, 0, nil); err != nil {
		t.Fatalf("nil became %v", err)
	}
	if err := f.See("cuStreamDestroy_v2", 0, 0, invalid); err != invalid {
		t.Fatalf("a plain driver error became %v", err)
	}
	plain := errors.New("not the driver's")
	if err := f.See("x", 0, 0, plain); err != plain {
		t.Fatalf("a foreign error became %v", err)
	}
	if f.Err() != nil || f.Refuse("cuLaunchKernel") != nil {
		t.Fatal("a pool that saw no sticky error is lost")
	}
}

func TestSeeKeepsTheFirstStickyError(t *testing.T) {
	f := newState("a")
	wrapped := fmt.Errorf("launching: %w", illegal)
	err := f.See("cuLaunchKernel", 1, 7, wrapped)
	var lost *lostErr
	if !errors.As(err, &lost) {
		t.Fatalf("%v: want the lost error", err)
	}
	if lost.Err != illegal || lost.Op != "cuLaunchKernel" || lost.Tenant != "a" || lost.Stream != 7 || lost.At.IsZero() {
		t.Fatalf("record %+v", lost.Record)
	}
	second := &cuda.Error{Op: "cuMemAlloc_v2", Code: cuda.ErrorLaunchFailed}
	if err := f.See("cuMemAlloc_v2", 0, 0, second); err != lost {
		t.Fatalf("a later sticky error answered %v, not the first", err)
	}
	if f.Err() != lost || f.Refuse("cuMemFree_v2") != lost {
		t.Fatal("the state does not answer with the first lost error")
	}
}

// Many calls meeting the fault at once: one record wins, and every one of
// them answers with it.
func TestSeeRacingCallsAgreeOnOneRecord(t *testing.T) {
	f := newState("")
	var wg sync.WaitGroup
	got := make([]error, 16)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = f.See("op", 0, cuda.Stream(i+1), illegal)
		}()
	}
	wg.Wait()
	for _, err := range got {
		if err != f.Err() {
			t.Fatalf("%v: not the kept error %v", err, f.Err())
		}
	}
}

func TestForgive(t *testing.T) {
	// A cleanup error that is not a fault is not forgiven on a healthy pool.
	f := newState("")
	if err := f.Forgive(invalid); err != invalid {
		t.Fatalf("Forgive(%v) = %v on a healthy pool", invalid, err)
	}
	if f.Forgive(nil) != nil || f.Err() != nil {
		t.Fatal("Forgive(nil) changed something")
	}
	// A cleanup that is the first to meet a sticky fault loses the
	// device, and is forgiven: errors.Join puts a plain error first,
	// which errors.As would stop at.
	joined := errors.Join(invalid, illegal)
	if err := f.Forgive(joined); err != nil {
		t.Fatalf("Forgive(%v) = %v", joined, err)
	}
	lost, _ := f.Err().(*lostErr)
	if lost == nil || lost.Op != "cleanup" || lost.Err != illegal {
		t.Fatalf("lost %+v, want the cleanup's sticky error", lost)
	}
	// On a lost device every cleanup error is forgiven.
	if err := f.Forgive(invalid); err != nil {
		t.Fatalf("Forgive(%v) = %v on a lost pool", invalid, err)
	}
}

// The guard asks Refuse and See on every driver call: on a healthy pool
// they must not allocate where the call succeeded, nor for a poll's "not
// ready" (a polled wait sees thousands a request).
func TestHealthyCallsAllocateNothing(t *testing.T) {
	f := newState("a")
	var w cuda.Watcher = f
	if n := testing.AllocsPerRun(100, func() {
		_ = w.Refuse("cuLaunchKernel")
		_ = w.See("cuLaunchKernel", 0, 0, nil)
		_ = w.See("cuStreamQuery", 0, 0, notReady) // a poll's answer
	}); n != 0 {
		t.Fatalf("%v allocations per healthy call", n)
	}
}

// concrete is the watcher as fcsp wrote it before this package (a pointer
// to a non-generic state): the baseline for BenchmarkWatch.
type concrete struct{ lost atomic.Pointer[lostErr] }

func (c *concrete) Refuse(string) error {
	if e := c.lost.Load(); e != nil {
		return e
	}
	return nil
}

func (c *concrete) See(op string, _ cuda.Context, _ cuda.Stream, err error) error {
	ce := cuda.AsError(err)
	if ce == nil || !ce.Code.Sticky() {
		return err
	}
	return c.Refuse(op)
}

// The guard's two questions of every driver call on a healthy pool, through
// the cuda.Watcher interface as the guard asks them.
func BenchmarkWatch(b *testing.B) {
	for _, c := range []struct {
		name string
		w    cuda.Watcher
	}{{"concrete", &concrete{}}, {"state", newState("")}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if c.w.Refuse("cuLaunchKernel") != nil || c.w.See("cuLaunchKernel", 0, 0, nil) != nil {
					b.Fatal("lost")
				}
			}
		})
	}
}
