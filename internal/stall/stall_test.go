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

// pin is a stream as a look pins it, counting its pins.
type pin struct {
	life, pinned int
}

func (p *pin) Pin(gen uint64) (Stream, bool) {
	if gen != uint64(p.life) {
		return Stream{}, false
	}
	p.pinned++
	return Stream{Key: Key{Gen: gen}}, true
}

func (p *pin) Unpin() { p.pinned-- }

// A look sees the streams still of the life listed, pinned while f runs,
// and unpins each it pinned once f returns.
func TestLookPinsWhileItLooks(t *testing.T) {
	live, reused := &pin{life: 1}, &pin{life: 2}
	var seen []Stream
	Look([]Listed{{Pin: live, Gen: 1}, {Pin: reused, Gen: 1}}, func(s []Stream) {
		seen = s
		require.Equal(t, 1, live.pinned, "pinned while f looks")
		require.Zero(t, reused.pinned, "a state reused since it was listed is not pinned")
	})
	require.Len(t, seen, 1)
	require.Zero(t, live.pinned, "unpinned once f returned")
}
