package graphs

import (
	"errors"
	"testing"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
)

func setUp(t *testing.T) (*fake.Driver, cuda.Context, cuda.Stream) {
	t.Helper()
	drv, ctx, s, err := fake.OpenPrimary(fake.H200())
	if err != nil {
		t.Fatal(err)
	}
	return drv, ctx, s
}

func capture(t *testing.T, gs *Set, ctx cuda.Context, s cuda.Stream, keep bool) cuda.Graph {
	t.Helper()
	if err := gs.BeginCapture(ctx, s); err != nil {
		t.Fatal(err)
	}
	g, err := gs.EndCapture(ctx, s, keep)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// Every graph and executable graph is destroyed exactly once, by its
// owner or by the set's Close, whichever comes first (the fake refuses a
// second destroy of a handle with CUDA_ERROR_INVALID_VALUE).
func TestEachHandleIsDestroyedOnce(t *testing.T) {
	drv, ctx, s := setUp(t)
	gs := New(drv)
	dropped := capture(t, gs, ctx, s, false)
	if dropped != 0 {
		t.Fatalf("a capture not kept returned graph %#x", dropped)
	}
	g1, g2 := capture(t, gs, ctx, s, true), capture(t, gs, ctx, s, true)
	e1, err := gs.Instantiate(ctx, g1)
	if err != nil {
		t.Fatal(err)
	}
	e2, err := gs.Instantiate(ctx, g2)
	if err != nil {
		t.Fatal(err)
	}
	if err := gs.Launch(ctx, e1, s); err != nil {
		t.Fatal(err)
	}
	// The owners destroy g1 and e1, twice each: the second is no call.
	for range 2 {
		if err := gs.DestroyGraph(ctx, g1); err != nil {
			t.Fatal(err)
		}
		if err := gs.DestroyExec(ctx, e1); err != nil {
			t.Fatal(err)
		}
	}
	before := drv.Calls("cuGraphDestroy") + drv.Calls("cuGraphExecDestroy")
	if err := gs.Close(ctx); err != nil { // g2 and e2 are left
		t.Fatal(err)
	}
	if got := drv.Calls("cuGraphDestroy") + drv.Calls("cuGraphExecDestroy") - before; got != 2 {
		t.Fatalf("Close destroyed %d handles; want the 2 left", got)
	}
	// After Close the owners' destroys are no calls, and nothing is listed.
	if err := errors.Join(gs.DestroyGraph(ctx, g2), gs.DestroyExec(ctx, e2)); err != nil {
		t.Fatal(err)
	}
	if _, err := gs.Instantiate(ctx, capture(t, New(drv), ctx, s, true)); !errors.Is(err, ErrClosed) {
		t.Fatalf("listed after Close: %v", err)
	}
}

// tenant counts the calls made in its life lock; refuse turns them away.
type tenant struct {
	ctx    cuda.Context
	in     int
	refuse error
}

func (t *tenant) Enter() (uint32, error) {
	if t.refuse != nil {
		return 0, t.refuse
	}
	t.in++
	return 0, nil
}
func (t *tenant) Exit(uint32)                              { t.in-- }
func (t *tenant) Primary() cuda.Context                    { return t.ctx }
func (t *tenant) DoGreen(f func(cuda.Context) error) error { return f(t.ctx) }

// A graph is instantiated and closed in its tenant's life lock; a close
// the closing tenant refuses leaves the graph to the set's Close, once.
func TestInLifeLeavesARefusedCloseToTheSet(t *testing.T) {
	drv, ctx, s := setUp(t)
	gs := New(drv)
	tn := &tenant{ctx: ctx}
	var g Graph
	if err := gs.Capture(&g, tn.DoGreen, s, &Recording{}, 0, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	var e Exec
	if err := g.InstantiateIn(tn, &e); err != nil || tn.in != 0 {
		t.Fatalf("instantiate: %v, %d calls left in the life lock", err, tn.in)
	}
	if err := InLife(tn, e.Close); err != nil || tn.in != 0 {
		t.Fatalf("exec close: %v, %d calls left in the life lock", err, tn.in)
	}
	tn.refuse = ErrClosed
	if err := InLife(tn, g.Close); err != nil {
		t.Fatalf("a close refused by a closing tenant: %v; want nil, the set's Close destroys it", err)
	}
	before := drv.Calls("cuGraphDestroy")
	if err := gs.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := drv.Calls("cuGraphDestroy") - before; got != 1 {
		t.Fatalf("the set's Close destroyed %d graphs; want the 1 whose close was refused", got)
	}
}
