package life

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// requireNoneWithin fails if ch yields (or closes) within d: what it
// stands for is still held back.
func requireNoneWithin[T any](t *testing.T, ch <-chan T, d time.Duration, msg string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatal(msg)
	case <-time.After(d):
	}
}

// TestLifeLockEndWaitsForCallsInFlight: End returns only after every call
// that got in has left, and no call gets in after it began.
func TestLifeLockEndWaitsForCallsInFlight(t *testing.T) {
	var l Lock
	held := make(chan struct{})
	release := make(chan struct{})
	go func() {
		slot, ok := l.Enter(func() bool { return false })
		if !ok {
			panic("refused before end")
		}
		close(held)
		<-release
		l.Exit(slot)
	}()
	<-held
	ended := make(chan struct{})
	go func() { l.End(); close(ended) }()
	requireNoneWithin(t, ended, 20*time.Millisecond, "end returned with a call in flight")
	for !l.ending.Load() {
		time.Sleep(time.Millisecond)
	}
	_, ok := l.Enter(func() bool { return false })
	require.False(t, ok, "a call got in after end began")
	close(release)
	<-ended
}

// TestLifeLockStorm: callers from many goroutines race with End; once End
// returns nobody is inside, and nobody gets in again.
func TestLifeLockStorm(t *testing.T) {
	for range 20 {
		var l Lock
		var inside atomic.Int64
		var after atomic.Bool
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for {
					slot, ok := l.Enter(func() bool { return false })
					if !ok {
						return
					}
					if after.Load() {
						panic("a call got in after end returned")
					}
					inside.Add(1)
					inside.Add(-1)
					l.Exit(slot)
				}
			})
		}
		time.Sleep(time.Millisecond)
		l.End()
		after.Store(true)
		require.Zero(t, inside.Load())
		wg.Wait()
	}
}

// TestLifeLockSlotsHandedOn: an ended lock's slots go to the next lock
// while late callers of the ended one may still count themselves in and
// out of them. The next lock's End must still wait for its own call in
// flight, every time.
func TestLifeLockSlotsHandedOn(t *testing.T) {
	for range 200 {
		var old Lock
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for {
					slot, ok := old.Enter(func() bool { return false })
					if !ok {
						// Late calls keep trying the ended lock while the next
						// one takes its slots.
						for range 50 {
							if _, ok := old.Enter(func() bool { return false }); ok {
								panic("in after end")
							}
						}
						return
					}
					old.Exit(slot)
				}
			})
		}
		old.End()
		var next Lock
		slot, ok := next.Enter(func() bool { return false })
		require.True(t, ok)
		ended := make(chan struct{})
		go func() { next.End(); close(ended) }()
		select {
		case <-ended:
			t.Fatal("end returned with a call in flight")
		case <-time.After(time.Millisecond):
		}
		next.Exit(slot)
		<-ended
		wg.Wait()
	}
}

func TestInFlightCountsCallsUnderWay(t *testing.T) {
	var l Lock
	require.Zero(t, l.InFlight())
	var slots []uint32
	for range 5 {
		s, ok := l.Enter(func() bool { return false })
		require.True(t, ok)
		slots = append(slots, s)
	}
	require.Equal(t, 5, l.InFlight())
	for _, s := range slots {
		l.Exit(s)
	}
	require.Zero(t, l.InFlight())
}

// A wait (EnterWait) is neither held back nor waited for by PauseCalls;
// Pause holds it back and waits for it; End waits for it. Calls are held
// and waited for by both pauses.
func TestWaitsPassAPauseOfCalls(t *testing.T) {
	var l Lock
	ctx := context.Background()
	no := func() bool { return false }
	w, ok := l.EnterWait(no)
	require.True(t, ok)
	done, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	require.NoError(t, l.PauseCalls(done), "a wait in flight does not hold a pause of calls")
	w2, ok := l.EnterWait(no)
	require.True(t, ok, "a wait gets in during a pause of calls")
	l.ExitWait(w2)
	entered := make(chan uint32)
	go func() {
		slot, ok := l.Enter(no)
		if ok {
			entered <- slot
		}
	}()
	requireNoneWithin(t, entered, 20*time.Millisecond, "a call got in during a pause of calls")
	l.Resume()
	l.Exit(<-entered)
	// Pause waits for the wait in flight, then holds new waits back.
	short, cancel2 := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel2()
	require.ErrorIs(t, l.Pause(short), context.DeadlineExceeded, "Pause waits for a wait in flight")
	require.False(t, l.Paused(), "a failed pause holds nothing")
	l.ExitWait(w)
	require.NoError(t, l.Pause(ctx))
	go func() {
		slot, ok := l.EnterWait(no)
		if ok {
			entered <- slot
		}
	}()
	requireNoneWithin(t, entered, 20*time.Millisecond, "a wait got in during a Pause")
	require.Equal(t, 0, l.InFlight())
	l.Resume()
	w = <-entered
	require.Equal(t, 1, l.InFlight(), "waits are in flight too")
	// End waits for a wait in flight.
	ended := make(chan struct{})
	go func() { l.End(); close(ended) }()
	requireNoneWithin(t, ended, 20*time.Millisecond, "End returned with a wait in flight")
	_, ok = l.EnterWait(no)
	require.False(t, ok, "a wait got in after End began")
	l.ExitWait(w)
	<-ended
}

// TryEnter gets in while no pause holds calls back, and never waits at a
// held gate: refused, with nothing left counted in, as after End.
func TestTryEnterNeverWaits(t *testing.T) {
	var l Lock
	ctx := context.Background()
	s, ok := l.TryEnter()
	require.True(t, ok)
	require.Equal(t, 1, l.InFlight())
	l.Exit(s)
	require.NoError(t, l.PauseCalls(ctx))
	_, ok = l.TryEnter()
	require.False(t, ok, "a pause holds calls back")
	require.Zero(t, l.InFlight())
	l.Resume()
	s, ok = l.TryEnter()
	require.True(t, ok)
	l.Exit(s)
	l.End()
	_, ok = l.TryEnter()
	require.False(t, ok, "ended")
}
