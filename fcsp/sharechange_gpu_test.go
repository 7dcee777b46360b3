package fcsp

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// On the H200: the lag after a change of share, both ways, for a tenant
// launching a ~0.15 ms spin kernel back to back (the GPU pacing it: at most
// two launches queued). Down, SetSMLimit(1 -> 0.25): the first launch that
// has to wait begins within one refill period (1 ms) of the change; the
// first H200 run measured 1.21 ms (to its return), the bucket's whole
// period of tokens draining at 0.75. Up, SetSMLimit(0.25 -> 1): the launch
// held at 0.25 returns within one period, and nothing waits after.
func TestGPUShareChangeLag(t *testing.T) {
	p := openGPU(t, WithPartitionUnit(64), WithLimiterTuning(LimiterTuning{RefillPeriod: time.Millisecond}))
	tn, err := p.NewTenant("lag", WithSMs(64), WithGPUShare(1))
	require.NoError(t, err)
	defer tn.Close()
	fn := spinKernel(t, tn)
	ctx := context.Background()
	s := tn.Stream()
	grid, block := Dim3{X: 128, Y: 1, Z: 1}, Dim3{X: 1024, Y: 1, Z: 1}
	var a Args
	a.Uint64(1 << 18)
	var ring [2]*Event
	for i := range ring {
		ring[i], err = tn.NewEvent()
		require.NoError(t, err)
		defer ring[i].Close()
	}
	n := 0
	// launch launches once, the GPU pacing it, and reports when it began
	// and ended and whether it waited for tokens.
	launch := func() (start, end time.Time, waited bool) {
		ev := ring[n%2]
		if n >= 2 {
			require.NoError(t, ev.Synchronize())
		}
		n++
		th := tn.Stats().Throttled
		start = time.Now()
		require.NoError(t, s.Launch(ctx, fn, grid, block, 0, &a))
		end = time.Now()
		require.NoError(t, ev.Record(s))
		return start, end, tn.Stats().Throttled > th
	}
	for range 64 { // at share 1, the kernel's estimate measured
		launch()
	}
	require.NoError(t, s.Synchronize())
	k := tn.Stats().GPUTime / time.Duration(tn.Stats().Launches)
	t.Logf("spin kernel: %.3f ms (metered)", float64(k)/1e6)

	// Down.
	for range 16 {
		launch()
	}
	t0 := time.Now()
	require.NoError(t, tn.SetSMLimit(0.25))
	var down time.Duration
	for i := 0; ; i++ {
		start, _, waited := launch()
		if waited {
			down = max(start.Sub(t0), 0)
			break
		}
		require.Less(t, i, 1000, "no launch waited after SetSMLimit(0.25)")
	}
	require.NoError(t, s.Synchronize())

	// Up: the share raised under a launcher held at 0.25.
	type change struct {
		t0, t1 time.Time
		err    error
	}
	raised := make(chan change, 1)
	go func() {
		time.Sleep(10 * time.Millisecond) // held at 0.25 meanwhile
		t0 := time.Now()
		err := tn.SetSMLimit(1)
		raised <- change{t0, time.Now(), err}
	}()
	type span struct {
		start, end time.Time
		waited     bool
	}
	var spans []span
	var c *change
	for i := 0; c == nil || time.Since(c.t1) < 10*time.Millisecond; i++ {
		var sp span
		sp.start, sp.end, sp.waited = launch()
		spans = append(spans, sp)
		if c == nil {
			select {
			case x := <-raised:
				require.NoError(t, x.err)
				c = &x
			default:
			}
		}
		require.Less(t, i, 100000)
	}
	require.NoError(t, s.Synchronize())
	var up time.Duration
	waitedAfter := 0
	for _, sp := range spans {
		if !sp.start.After(c.t1) && sp.end.After(c.t0) {
			up = max(up, sp.end.Sub(c.t0)) // held, perhaps, at the old share
		}
		if sp.start.After(c.t1) && sp.waited {
			waitedAfter++
		}
	}
	t.Logf("lag after SetSMLimit(1 -> 0.25): %.3f ms to the first launch that waited; after SetSMLimit(0.25 -> 1): %.3f ms until the last launch held at 0.25 returned, %d waited after (refill period 1 ms)",
		float64(down)/1e6, float64(up)/1e6, waitedAfter)
	require.LessOrEqual(t, down, time.Millisecond, "down: the old share governed longer than one refill period")
	require.LessOrEqual(t, up, time.Millisecond, "up: a launch was held at the old share longer than one refill period")
	require.Zero(t, waitedAfter, "launches waited at share 1")
}
