package smpart_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// GaveDrained waits only for the work on SMs the last Reshape gave up:
// after a growth the old layout's work runs on SMs the partition still
// holds; after a shrink, until its hand-over events are reached. Drained
// waits for either.
func TestGaveDrainedIsAboutTheSMsGivenUp(t *testing.T) {
	drv, _, s := fakeSplit(t, 8)
	p, err := s.TakeLayouts(16, []int{16, 32}, 0)
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	state := func() (gave, all bool) {
		t.Helper()
		gave, err := p.GaveDrained()
		require.NoError(t, err)
		all, err = p.Drained()
		require.NoError(t, err)
		return gave, all
	}
	gave, all := state()
	require.True(t, gave && all, "never reshaped")
	drv.HoldEvents(true) // the work queued before a Reshape never ends
	defer drv.HoldEvents(false)
	require.NoError(t, p.Reshape(32, nil))
	gave, all = state()
	require.True(t, gave, "grown: nothing given up")
	require.False(t, all, "the old layout's work still runs")
	require.NoError(t, p.Reshape(16, nil))
	gave, all = state()
	require.False(t, gave, "shrunk: the SMs given up still run its work")
	require.False(t, all)
	drv.HoldEvents(false)
	gave, all = state()
	require.True(t, gave && all, "the work has run")
}

// The commons' GaveDrained: after a Follow that leaves SMs (a partition
// took them) it waits for the work the commons' streams held then; after
// one that only adds SMs, nothing is left on SMs it gave.
func TestCommonsGaveDrainedAfterItLeftSMs(t *testing.T) {
	drv, d, s := fakeSplit(t, 8)
	c, err := d.NewCommons()
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	_, err = c.NewStream() // a tenant's: work queued on it before a move
	require.NoError(t, err)
	follow := func() {
		t.Helper()
		idx, rem, whole, _ := s.Commons()
		require.NoError(t, c.Follow(s.CommonsKey(idx, rem, whole), s.Resources(idx, rem), nil, false))
	}
	gave := func() bool {
		t.Helper()
		done, err := c.GaveDrained()
		require.NoError(t, err)
		return done
	}
	require.True(t, gave(), "never moved")

	drv.HoldEvents(true)
	defer drv.HoldEvents(false)
	p, err := s.TakeLayouts(16, []int{16, 32}, 0)
	require.NoError(t, err)
	follow() // the whole device to the SMs p does not hold
	require.False(t, gave(), "left the partition's SMs with its work still queued")
	drv.HoldEvents(false)
	require.True(t, gave(), "the work has run")

	// A claim is a move off the claimed SMs; an Unclaim one back onto them,
	// which gives nothing up.
	drv.HoldEvents(true)
	require.NoError(t, p.Claim(32))
	follow()
	require.False(t, gave())
	drv.HoldEvents(false)
	require.True(t, gave())
	drv.HoldEvents(true)
	p.Unclaim()
	follow()
	require.True(t, gave(), "grew: nothing given up")
	require.NoError(t, p.Close())
	follow() // back to the whole device
	require.True(t, gave(), "grew: nothing given up")
}

// Claim takes a growth's groups ahead of its Reshape, which then uses
// them; Unclaim gives back an unused claim; Close gives back a claim with
// what the partition holds. A claim of groups another partition holds is
// ErrInsufficientSMs, nothing taken.
func TestClaimTakesAGrowthsGroupsAhead(t *testing.T) {
	_, _, s := fakeSplit(t, 8)
	free := func() int {
		idx, _, whole, _ := s.Commons()
		if whole {
			return s.Groups()
		}
		return len(idx)
	}
	all := free()
	p, err := s.TakeLayouts(16, []int{16, 32}, 0)
	require.NoError(t, err)
	require.Equal(t, all-2, free())
	require.NoError(t, p.Claim(32))
	require.Equal(t, all-4, free(), "claimed ahead of the Reshape")
	require.Equal(t, 16, p.SMs())
	require.NoError(t, p.Claim(16), "no growth: nothing to claim")
	require.ErrorIs(t, p.Claim(24), smpart.ErrGranularity, "no layout of 24 SMs")
	require.Equal(t, all-4, free(), "the refusal took nothing and gave nothing back")
	p.Unclaim()
	require.Equal(t, all-2, free())
	require.NoError(t, p.Claim(32))
	require.NoError(t, p.Reshape(32, nil))
	require.Equal(t, all-4, free(), "the Reshape used the claim")
	p.Unclaim()
	require.Equal(t, all-4, free(), "nothing left unused to give back")
	require.NoError(t, p.Reshape(16, nil))
	require.Equal(t, all-2, free())

	q, err := s.TakeRest()
	require.NoError(t, err)
	require.ErrorIs(t, p.Claim(32), smpart.ErrInsufficientSMs)
	require.NoError(t, q.Close())
	require.NoError(t, p.Claim(32))
	require.NoError(t, p.Close())
	require.Equal(t, all, free(), "Close gave the claim back with the rest")
	require.ErrorIs(t, p.Claim(32), smpart.ErrClosed)
}

// Drained answers without the partition's lock where nothing is left to
// drain: a call holding the lock (here a Close waiting for a stream's
// work; in a server, the NewStream and Close of a class that makes a
// stream per request) must not make a partition never reshaped read as
// draining, which holds every decision of the pool's controller back (in
// fcsp's TestRelativeLatencyTarget under -race, 5 runs in 60 never grew).
func TestDrainedNeedsNoLockWithNothingToDrain(t *testing.T) {
	drv, _, s := fakeSplit(t, 8)
	p, err := s.TakeLayouts(16, []int{16, 32}, 0)
	require.NoError(t, err)
	release, err := drv.HoldStream(p.Stream())
	require.NoError(t, err)
	closed := make(chan error, 1)
	go func() { closed <- p.Close() }() // holds the lock until the stream's work ends
	require.Eventually(t, func() bool { return !p.TryLockForTest() }, 5*time.Second, time.Millisecond, "Close holds the lock")
	for _, f := range []func() (bool, error){p.Drained, p.GaveDrained} {
		done, err := f()
		require.NoError(t, err)
		require.True(t, done, "never reshaped: nothing to drain, whoever holds the lock")
	}
	release()
	require.NoError(t, <-closed)
}

// A reshapable partition's streams, in every layout, its first and those
// made later, are made at the priority it was taken at; another's at the
// default. The driver clamps what is past its range (the fake's: 0 to
// fake.GreatestPriority).
func TestLayoutsStreamsKeepThePartitionsPriority(t *testing.T) {
	drv, _, s := fakeSplit(t, 8)
	prio := func(h cuda.Stream) int {
		t.Helper()
		n, ok := drv.StreamPriority(h)
		require.True(t, ok, "a stream the driver does not know")
		return n
	}
	for _, c := range []struct {
		asked, want int
	}{{0, 0}, {cuda.StreamPriorityGreatest, fake.GreatestPriority}, {-2, -2}} {
		p, err := s.TakeLayouts(16, []int{16, 32}, c.asked)
		require.NoError(t, err)
		first := p.Stream()
		more, err := p.NewStream()
		require.NoError(t, err)
		require.Equal(t, c.want, prio(first), "the first stream, asked %d", c.asked)
		require.Equal(t, c.want, prio(more), "a stream made later, asked %d", c.asked)
		var swapped int
		require.NoError(t, p.Reshape(32, func(_, h cuda.Stream) {
			swapped++
			require.Equal(t, c.want, prio(h), "the grown layout's stream, asked %d", c.asked)
		}))
		require.Equal(t, 2, swapped)
		require.NoError(t, p.Close())
	}
}
