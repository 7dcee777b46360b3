package fcsp

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A change of limit neither mints nor loses tokens (issue 56). A GPU-share
// tenant whose work is never measured (events held) prices every launch
// and Do at one refill period: its bucket, full, holds exactly one. On a
// clock that never moves nothing refills, and a change of share scales
// the tokens in hand (none, once one was admitted; debt is kept), so
// however the admissions race the changes at most one is ever admitted.
// Eight goroutines race TryLaunch, Reserve/Cancel, Reservation.Launch and
// TryDo while another changes the share (0.25, 0.75, 0.5, 0.1 in turn).
// Then, with everything given back, the share is raised to 0.9: had none
// been admitted the bucket would be full (its fill is at least
// 0.9/0.75 of a bucket after any of the changes), so exactly one launch
// goes in all, neither more (minted) nor none (lost).
func TestLimitChangeNeitherMintsNorLoses(t *testing.T) {
	p, drv := openSim(t)
	drv.HoldEvents(true) // nothing measured: every price is one bucket
	t.Cleanup(func() { drv.HoldEvents(false) })
	var clk simClock // frozen: no token ever refills
	tn, err := p.NewTenant("share", WithGPUShare(0.5), withClock(clk.now))
	require.NoError(t, err)
	defer tn.Close()
	fn := spinKernel(t, tn)
	s := tn.Stream()
	var a Args
	a.Uint64(0)
	ctx := t.Context()
	do := func(cur Current) error {
		_, err := cur.Stream(nil) // a bracket that is never measured
		return err
	}

	var admitted atomic.Int64
	var done atomic.Bool
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var a Args
			a.Uint64(0)
			for i := g; !done.Load(); i++ {
				var err error
				switch i % 4 {
				case 0:
					err = s.TryLaunch(fn, one, one, 0, &a)
				case 1:
					var r *Reservation
					if r, err = s.Reserve(fn, one, one); err == nil {
						runtime.Gosched()
						r.Cancel()
						continue
					}
				case 2:
					var r *Reservation
					if r, err = s.Reserve(fn, one, one); err == nil {
						lctx, cancel := context.WithTimeout(ctx, 200*time.Microsecond)
						err = r.Launch(lctx, 0, &a)
						cancel()
					}
				case 3:
					err = tn.TryDo(ctx, do)
				}
				switch {
				case err == nil:
					admitted.Add(1)
				case errors.Is(err, ErrThrottled), errors.Is(err, context.DeadlineExceeded):
				default:
					errs <- err
					return
				}
			}
		}()
	}
	for i := range 400 {
		require.NoError(t, tn.SetSMLimit([]float64{0.25, 0.75, 0.5, 0.1}[i%4]))
		runtime.Gosched()
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	storm := admitted.Load()
	require.LessOrEqual(t, storm, int64(1), "a bucket that holds one launch admitted %d under changes of share (tokens minted)", storm)
	require.NoError(t, tn.SetSMLimit(0.9))
	if s.TryLaunch(fn, one, one, 0, &a) == nil {
		admitted.Add(1)
	}
	require.Equal(t, int64(1), admitted.Load(), "admitted %d in the storm and %d after (want exactly one in all: none means tokens were lost)", storm, admitted.Load()-storm)
}
