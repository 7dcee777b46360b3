package stall

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
)

// tenant is a watched tenant of the test: its streams, and its stalls.
type tenant struct {
	mu      sync.Mutex
	streams []Stream
	stalled chan Report
}

func (t *tenant) Name() string { return "t" }

func (t *tenant) Streams(f func([]Stream)) bool {
	t.mu.Lock()
	s := append([]Stream(nil), t.streams...)
	t.mu.Unlock()
	f(s)
	return true
}

func (t *tenant) Stalled(r Report) bool { t.stalled <- r; return true }

func setup(t *testing.T) (*fake.Driver, cuda.Context, *Watchdog, *tenant, cuda.Stream) {
	t.Helper()
	drv := fake.New(fake.H200())
	dev, err := drv.DeviceGet(0)
	require.NoError(t, err)
	primary, err := drv.PrimaryCtxRetain(dev)
	require.NoError(t, err)
	s, err := drv.StreamCreate(primary, cuda.StreamNonBlocking)
	require.NoError(t, err)
	w := New(drv, primary, nil, nil)
	tn := &tenant{streams: []Stream{{Key: Key{Core: 1}, H: s, Class: "default"}}, stalled: make(chan Report, 1)}
	t.Cleanup(func() {
		require.NoError(t, w.Close())
		require.Zero(t, drv.Live().Events, "the watchdog's markers destroyed")
	})
	return drv, primary, w, tn, s
}

// A stream held past the bound is reported once, within the bound and two
// ticks of the hold; an idle stream and a stream that makes progress are
// not.
func TestHeldStreamIsReported(t *testing.T) {
	drv, _, w, tn, s := setup(t)
	const bound = 40 * time.Millisecond
	w.Watch(tn, bound)
	// Progress: held and let go in turns shorter than the bound.
	for range 5 {
		release, err := drv.HoldStream(s)
		require.NoError(t, err)
		time.Sleep(bound / 2)
		release()
	}
	select {
	case r := <-tn.stalled:
		t.Fatalf("progress read as a stall: %+v", r)
	default:
	}
	release, err := drv.HoldStream(s)
	require.NoError(t, err)
	defer release()
	held := time.Now()
	select {
	case r := <-tn.stalled:
		took := time.Since(held)
		require.GreaterOrEqual(t, took, bound)
		require.Less(t, took, bound+10*TickFor(bound)) // two ticks, with room for a loaded host
		require.Equal(t, uintptr(s), r.Stream)
		require.Equal(t, bound, r.Bound)
		require.Equal(t, "t", r.Tenant)
	case <-time.After(50 * bound):
		t.Fatal("no stall reported")
	}
	time.Sleep(3 * bound)
	select {
	case r := <-tn.stalled:
		t.Fatalf("reported twice: %+v", r)
	default:
	}
}

// The tick is a twentieth of the smallest bound, within 1 to 5 ms.
func TestTickFor(t *testing.T) {
	require.Equal(t, time.Millisecond, TickFor(5*time.Millisecond))
	require.Equal(t, 2*time.Millisecond, TickFor(40*time.Millisecond))
	require.Equal(t, 5*time.Millisecond, TickFor(time.Second))
}
