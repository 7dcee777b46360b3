package fcsp

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/hostwait"
	"github.com/stretchr/testify/require"
)

// Issue 39 #15: Synchronize of a stream whose waits were long, with nothing
// left to do, returns at once: the sleeping wait asks the stream before it
// sleeps (it slept 7/8 of the history before, 34.5 ms of 40).
func TestSynchronizeOfIdleLongStreamDoesNotSleep(t *testing.T) {
	defer hostwait.SetSchedBusy(true)()
	p, _ := openSim(t)
	tn, err := p.NewTenant("t", WithSMs(8))
	require.NoError(t, err)
	s := tn.Stream()
	for range 64 {
		s.c.Waits().Add(400 * time.Millisecond)
	}
	start := time.Now()
	require.NoError(t, s.Synchronize())
	require.Less(t, time.Since(start), 100*time.Millisecond, "a Synchronize with nothing to wait for (it slept 7/8 of 400 ms before)")
	require.True(t, s.c.Waits().Long(), "a wait that found nothing to wait for pulled the stream's history down")
	runtime.KeepAlive(tn)
}

// The sleeping wait still sleeps where work is outstanding: the work is
// held at the wait's first query and let go once the wait has asked.
func TestLongWaitsSleepWhileWorkOutstanding(t *testing.T) {
	defer hostwait.SetSchedBusy(true)()
	p, drv := openSim(t)
	tn, err := p.NewTenant("t", WithSMs(8))
	require.NoError(t, err)
	s := tn.Stream()
	for range 32 {
		s.c.Waits().Add(2 * time.Millisecond)
	}
	st, q := drv.Calls("cuStreamSynchronize"), drv.Calls("cuStreamQuery")
	drv.HoldEvents(true)
	released := make(chan struct{})
	go func() { // the work ends once the wait has asked (or after 1 s: the test fails)
		defer close(released)
		for t0 := time.Now(); drv.Calls("cuStreamQuery") == q && time.Since(t0) < time.Second; {
			runtime.Gosched()
		}
		drv.HoldEvents(false)
	}()
	start := time.Now()
	require.NoError(t, s.Synchronize())
	el := time.Since(start)
	<-released
	require.GreaterOrEqual(t, el, 1500*time.Microsecond, "a long stream's wait with work outstanding sleeps")
	require.Equal(t, st, drv.Calls("cuStreamSynchronize"), "a long stream's wait spun in the driver")
	require.GreaterOrEqual(t, drv.Calls("cuStreamQuery"), q+2, "a long stream's wait asks, sleeps, and asks again")
	runtime.KeepAlive(tn)
}

// Issue 39 #14: NewTenant refuses a name that cannot be its metrics' tenant
// label (not valid UTF-8, or empty) with ErrInvalidArgument saying what a
// name may be; one such tenant failed every scrape of the pool.
func TestNewTenantRefusesUnusableName(t *testing.T) {
	p, _ := openSim(t)
	free := p.Stats().FreeSMs
	for _, name := range []string{"bad\xff", ""} {
		_, err := p.NewTenant(name, WithSMs(8))
		require.ErrorIs(t, err, ErrInvalidArgument, "name %q", name)
		require.ErrorContains(t, err, "valid UTF-8", "name %q", name)
	}
	require.Empty(t, p.Stats().Tenants)
	require.Equal(t, free, p.Stats().FreeSMs, "a refused tenant kept SMs")
}

// Issue 39 #17: a shared region file truncated while mapped killed every
// member with SIGBUS at its next allocation. An allocation now fails with
// ErrBadRegion, the pool's figures read, and the pool closes.
func TestTruncatedSharedRegionIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "region")
	// The heartbeat meets the truncated mapping too, and recovers its fault
	// as a panic (debug.SetPanicOnFault) - except under the race detector,
	// whose runtime makes the atomic accesses: a fault inside it is fatal to
	// the process (CI, 2026-12-05: "unexpected return pc for
	// runtime.sigpanic" in the heartbeat's goroutine). There the heartbeat
	// does not tick during the test; without -race it ticks every ms.
	beat := time.Millisecond
	if raceEnabled {
		beat = time.Hour
	}
	p, err := openSimErr(0, WithSharedRegion(path), WithHeartbeat(beat, 2*time.Hour))
	require.NoError(t, err)
	tn, err := p.NewTenant("t")
	require.NoError(t, err)
	ctx := context.Background()
	_, err = tn.Alloc(ctx, 1<<20)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(path, 0))
	_, err = tn.Alloc(ctx, 1<<20)
	require.ErrorIs(t, err, ErrBadRegion)
	_ = p.MemoryUsed()
	_ = p.Stats()
	time.Sleep(5 * time.Millisecond) // the heartbeat and the reaper meet it too
	require.NoError(t, tn.Close())
	require.NoError(t, p.Close())
}
