package fcsp

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/smmove"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// The commons hands its SMs over as a partition does (handoff.go): a
// partition made beside an unpartitioned tenant is handed out only once
// the work that tenant queued on its SMs has run, at most the bound.
func TestNewPartitionWaitsForThePlainTenantsWork(t *testing.T) {
	t.Run("drained", func(t *testing.T) {
		p, drv := openSim(t)
		p.moves.SetHandOff(time.Minute) // the release comes inside the wait, however slow the host
		plain, err := p.NewTenant("plain")
		require.NoError(t, err)
		drv.HoldEvents(true) // what plain queued never ends
		t.Cleanup(func() { drv.HoldEvents(false) })
		made := make(chan error, 1)
		go func() {
			_, err := p.NewTenant("interactive", WithSMs(16))
			made <- err
		}()
		requireNoneWithin(t, made, smmove.HandOffMax, "handed out onto SMs still running the plain tenant's work")
		require.Equal(t, 132-16, plain.SMs(), "the plain tenant left them first")
		require.NoError(t, plain.Do(context.Background(), func(Current) error { return nil }), "its calls go on")
		drv.HoldEvents(false)
		require.NoError(t, <-made)
	})
	t.Run("bounded", func(t *testing.T) {
		p, drv := openSim(t)
		plain, err := p.NewTenant("plain")
		require.NoError(t, err)
		defer runtime.KeepAlive(plain) // a collected handle is closed: nothing would be left to wait for
		drv.HoldEvents(true)
		t.Cleanup(func() { drv.HoldEvents(false) })
		began := time.Now()
		lat, err := p.NewTenant("interactive", WithSMs(16))
		require.NoError(t, err)
		require.GreaterOrEqual(t, time.Since(began), smmove.HandOffMax, "waited out the bound")
		require.Equal(t, 16, lat.SMs())
	})
}

// A growth beside an unpartitioned tenant claims its new SMs first, so
// that the tenant leaves them while the growing one's calls go on, and
// switches only once the work queued there has run; ctx ending the wait
// gives the claim back and the plain tenant its SMs, nothing changed.
func TestGrowthWaitsForThePlainTenantsWork(t *testing.T) {
	p, drv := openSim(t)
	p.moves.SetHandOff(time.Minute)
	ctx := context.Background()
	plain, err := p.NewTenant("plain")
	require.NoError(t, err)
	lat, err := p.NewTenant("interactive", WithSMs(16), WithReshapeSizes(16, 32))
	require.NoError(t, err)
	noop := func(Current) error { return nil }

	drv.HoldEvents(true)
	t.Cleanup(func() { drv.HoldEvents(false) })
	began := time.Now()
	require.ErrorIs(t, lat.Reshape(ctx, 24), ErrGranularity, "no layout of 24 SMs")
	require.Less(t, time.Since(began), time.Minute/2, "a size it has no layout of is refused before any wait")
	require.Equal(t, 132-16, plain.SMs(), "the refusal moved nothing")
	grown := make(chan error, 1)
	go func() { grown <- lat.Reshape(ctx, 32) }()
	requireNoneWithin(t, grown, smmove.HandOffMax, "grown onto SMs still running the plain tenant's work")
	require.Equal(t, 132-32, plain.SMs(), "the claim moved the plain tenant off first")
	require.Equal(t, 16, lat.SMs())
	require.NoError(t, lat.Do(ctx, noop), "the growing tenant's calls go on")
	require.NoError(t, plain.Do(ctx, noop))
	drv.HoldEvents(false)
	require.NoError(t, <-grown)
	require.Equal(t, 32, lat.SMs())
	require.Equal(t, 132-32, plain.SMs())

	require.NoError(t, lat.Reshape(ctx, 16))
	require.Equal(t, 132-16, plain.SMs(), "a shrink gives the plain tenant the SMs back")
	drv.HoldEvents(true)
	cctx, cancel := context.WithCancel(ctx)
	go func() { grown <- lat.Reshape(cctx, 32) }()
	requireNoneWithin(t, grown, smmove.HandOffMax, "grown onto SMs still running the plain tenant's work")
	cancel()
	require.ErrorIs(t, <-grown, context.Canceled)
	require.Equal(t, 16, lat.SMs())
	require.Equal(t, 132-16, plain.SMs(), "the claim went back to the plain tenant")
	drv.HoldEvents(false)
	require.NoError(t, lat.Reshape(ctx, 32))
	require.Equal(t, 132-32, plain.SMs())
}

// Close races a growth's claim and wait beside an unpartitioned tenant:
// of the grower, of the plain tenant, of the pool. Every call returns, the
// Reshape either grew or says ErrClosed, and no SM is lost or held twice.
func TestCloseRacesAGrowthsClaim(t *testing.T) {
	for _, closer := range []string{"grower", "plain", "pool"} {
		t.Run(closer, func(t *testing.T) {
			p, drv := openSim(t)
			ctx := context.Background()
			plain, err := p.NewTenant("plain")
			require.NoError(t, err)
			lat, err := p.NewTenant("interactive", WithSMs(16), WithReshapeSizes(16, 32))
			require.NoError(t, err)
			drv.HoldEvents(true)
			t.Cleanup(func() { drv.HoldEvents(false) })
			grown := make(chan error, 1)
			go func() { grown <- lat.Reshape(ctx, 32) }()
			time.Sleep(smmove.HandOffMax / 8)
			switch closer {
			case "grower":
				require.NoError(t, lat.Close())
			case "plain":
				require.NoError(t, plain.Close())
			case "pool":
				require.NoError(t, p.Close())
			}
			err = <-grown
			if err != nil && !errors.Is(err, ErrClosed) {
				t.Fatalf("Reshape racing the close: %v", err)
			}
			drv.HoldEvents(false)
			if closer == "pool" {
				return
			}
			st := p.Stats()
			held := 0
			for _, ts := range st.Tenants {
				if ts.Partitioned {
					held += ts.SMs
				}
			}
			require.Equal(t, 132, held+st.FreeSMs, "SMs lost or held twice")
			if closer == "plain" {
				require.NoError(t, err, "a closed plain tenant leaves nothing to wait for")
				require.Equal(t, 32, lat.SMs())
			} else {
				require.Equal(t, 132, plain.SMs(), "the grower's SMs, its claim's included, went back")
			}
		})
	}
}

// A growth's wait stays within its bound beside a giver whose Close is
// waiting for its streams (holding its partition meanwhile, which could be
// seconds of queued kernels): the wait asks again rather than waiting for
// that Close.
func TestGrowthWaitIsBoundedBesideAClosingGiver(t *testing.T) {
	p, d := openHold(t)
	ctx := context.Background()
	lat, batch := tradePair(t, p) // 8 and 124 SMs
	require.NoError(t, batch.Reshape(ctx, 100))
	arrived, release := d.hold("cuStreamSynchronize", cuda.Stream(batch.Stream().Handle()))
	released := sync.OnceFunc(func() { close(release) })
	defer released()
	closed := make(chan error, 1)
	go func() { closed <- batch.Close() }()
	<-arrived // the giver's Close waits for its stream
	grown := make(chan error, 1)
	go func() { grown <- lat.Reshape(ctx, 32) }()
	select {
	case err := <-grown:
		require.NoError(t, err)
	case <-time.After(20 * smmove.HandOffMax):
		t.Fatal("the growth waited for the giver's Close, past its bound")
	}
	require.Equal(t, 32, lat.SMs())
	released()
	require.NoError(t, <-closed)
}

// The controller beside an unpartitioned tenant that keeps working: the
// plain tenant shares the rest tenant's SMs (none is free), a burst grows
// the latency class to its most through the claim and the commons' moves,
// the plain tenant's calls all succeed meanwhile, and once idle every
// class is back where it began, the plain tenant never on the latency
// class's SMs.
func TestLatencyClassFollowsItsLoadBesideAPlainTenant(t *testing.T) {
	p, _ := openSim(t)
	ctx := context.Background()
	lat, err := p.NewTenant("interactive", WithLatencyTarget(300*time.Microsecond, 16, 48))
	require.NoError(t, err)
	rest, err := p.NewTenant("batch", WithRestOfSMs())
	require.NoError(t, err)
	plain, err := p.NewTenant("plain")
	require.NoError(t, err)
	require.Equal(t, 116, plain.SMs(), "the rest tenant's, shared")
	stopPlain := sync.OnceFunc(doLoop(2, func() {
		require.NoError(t, plain.Do(ctx, func(Current) error { time.Sleep(100 * time.Microsecond); return nil }))
		require.NoError(t, plain.Stream().Synchronize())
	}))
	defer stopPlain()
	stop := burstOf(t, lat)
	require.Eventually(t, func() bool { return lat.SMs() == 48 && lat.Stats().SMMoves > 0 }, 5*time.Second, time.Millisecond, "the burst grows the class to its most")
	require.Empty(t, overlap(smsOf(t, plain, plain.Stream()), smsOf(t, lat, lat.Stream())), "the plain tenant ran on the latency class's SMs")
	stop()
	require.Eventually(t, func() bool { return lat.SMs() == 16 && rest.SMs() == 116 && plain.SMs() == 116 }, 5*time.Second, time.Millisecond)
	stopPlain()
	require.Empty(t, overlap(smsOf(t, plain, plain.Stream()), smsOf(t, lat, lat.Stream())))
}
