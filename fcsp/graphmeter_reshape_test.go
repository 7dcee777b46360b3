package fcsp

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A metered stream's LaunchGraph polled the meter through a second entry
// into the tenant's life lock: a Reshape whose pause began between the two
// held the second at its gate while it waited for the first, and both
// hung. The launch now polls within its one entry.
// Failed (hung, then the 60 s guard) under -race -count=5 before the fix.
func TestMeteredLaunchGraphRacingReshape(t *testing.T) {
	p, _ := openSim(t)
	a, err := p.NewTenant("a", WithSMs(8), WithReshapeSizes(16), WithGPUMetering())
	require.NoError(t, err)
	fn := spinKernel(t, a)
	ctx := context.Background()
	var args Args
	args.Uint64(0)
	s := a.Stream()
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		var x *GraphExec
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if x == nil {
				g, err := s.Capture(ctx, func() error { return s.Launch(ctx, fn, Dim3{X: 1, Y: 1, Z: 1}, Dim3{X: 32, Y: 1, Z: 1}, 0, &args) })
				if err != nil {
					done <- err
					return
				}
				if x, err = g.Instantiate(); err != nil {
					done <- err
					return
				}
				_ = g.Close()
			}
			if err := s.LaunchGraph(ctx, x); errors.Is(err, ErrStaleGraph) {
				_ = x.Close()
				x = nil
			} else if err != nil {
				done <- err
				return
			}
		}
	}()
	reshaped := make(chan struct{})
	go func() {
		defer close(reshaped)
		for i := range 2000 {
			if err := a.Reshape(ctx, 8*(1+i%2)); err != nil {
				done <- err
				return
			}
		}
	}()
	select {
	case <-reshaped:
	case <-time.After(60 * time.Second):
		t.Fatal("a metered LaunchGraph and a Reshape waited for each other")
	}
	close(stop)
	require.NoError(t, <-done)
}
