package fcsp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// within10s fails the test if f does not return in 10 s (a deadlock).
func within10s(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s deadlocked", what)
		return nil
	}
}

// Issue 28 #2: Reshape holds new calls back and waits for the calls in
// flight; a Do is one, and the calls its f makes (Alloc, NewStream,
// Synchronize) waited at the gate the Reshape raised: both waited for
// ever, and Pool.Close after them. A metered tenant's Do deadlocked even
// empty (its admission and metering call into the tenant too), and so did
// a Capture whose function launches.
func TestReshapeRacingDoAndCapture(t *testing.T) {
	for _, opts := range [][]TenantOption{nil, {WithGPUMetering()}, {WithGPUShare(0.5)}} {
		t.Run(fmt.Sprint(len(opts), opts != nil), func(t *testing.T) {
			p, _ := openSim(t)
			a, err := p.NewTenant("a", append([]TenantOption{WithSMs(8), WithReshapeSizes(16)}, opts...)...)
			require.NoError(t, err)
			fn := spinKernel(t, a)
			ctx := context.Background()
			var wg sync.WaitGroup
			stop := make(chan struct{})
			for i := range 3 {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						var err error
						switch i {
						case 0:
							err = a.Do(ctx, func(cur Current) error {
								ptr, err := a.Alloc(ctx, 4096)
								if err != nil {
									return err
								}
								s, err := a.NewStream(ClassDefault)
								if err != nil {
									return err
								}
								return errors.Join(s.Synchronize(), s.Close(), a.Free(ptr))
							})
						case 1:
							err = a.Do(ctx, func(Current) error { return nil })
						case 2:
							var args Args
							args.Uint64(0)
							_, err = a.Stream().Capture(ctx, func() error {
								return a.Stream().Launch(ctx, fn, Dim3{X: 1, Y: 1, Z: 1}, Dim3{X: 32, Y: 1, Z: 1}, 0, &args)
							})
						}
						if err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			for i := range 50 {
				sms := []int{16, 8}[i%2]
				require.NoError(t, within10s(t, "Reshape racing Dos and a Capture", func() error { return a.Reshape(ctx, sms) }))
			}
			close(stop)
			wg.Wait()
			require.NoError(t, within10s(t, "Pool.Close after the reshapes", p.Close))
		})
	}
}

// Issue 28 #3: what waits for the tenant's Dos, called from inside one,
// waited for itself; it is ErrInsideDo, as Tenant.Close is. Reshape also
// honours its ctx while it waits for a Do of another goroutine.
func TestWaitersFromInsideDoAreRefused(t *testing.T) {
	p, _ := openSim(t)
	a, err := p.NewTenant("a", WithSMs(8), WithReshapeSizes(16))
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, within10s(t, "calls from inside Do", func() error {
		return a.Do(ctx, func(Current) error {
			for name, call := range map[string]func() error{
				"Reshape":       func() error { return a.Reshape(ctx, 16) },
				"Pool.Close":    p.Close,
				"Pool.Shutdown": func() error { return p.Shutdown(ctx) },
				"Shutdown":      func() error { return a.Shutdown(ctx) },
			} {
				err := call()
				require.ErrorIs(t, err, ErrInsideDo, name)
				require.ErrorContains(t, err, name, "the message names the call")
			}
			return nil
		})
	}))

	release := make(chan struct{})
	inF := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- a.Do(ctx, func(Current) error { close(inF); <-release; return nil })
	}()
	<-inF
	short, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, within10s(t, "Reshape with a ctx that ends", func() error { return a.Reshape(short, 16) }), context.DeadlineExceeded)
	close(release)
	require.NoError(t, <-done)
	require.NoError(t, a.Reshape(ctx, 16), "the abandoned reshape left the tenant usable")
	require.Equal(t, 16, a.SMs())
	require.ErrorIs(t, a.Reshape(nil, 8), ErrInvalidArgument) //nolint:staticcheck // a nil ctx is the point
}

// Issue 28 #14: Shutdown with a ctx that has already ended closes all the
// same, in the background, as documented (the project's own test said the
// opposite: it closed nothing); Pool.Close after a Shutdown whose deadline
// passed waits for the close.
func TestShutdownWithAnEndedContextStillCloses(t *testing.T) {
	p, drv := openSim(t)
	a, err := p.NewTenant("a", WithSMs(8))
	require.NoError(t, err)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, a.Shutdown(ended), context.Canceled)
	require.Eventually(t, func() bool { return a.c.closed.Load() }, 10*time.Second, time.Millisecond, "the tenant was not closed")
	a.c.waitClosed()

	q, _ := openSim(t)
	b, err := q.NewTenant("b", WithSMs(8))
	require.NoError(t, err)
	_, err = b.Alloc(context.Background(), 1<<20)
	require.NoError(t, err)
	require.ErrorIs(t, q.Shutdown(ended), context.Canceled)
	require.NoError(t, q.Close())
	require.True(t, b.c.closed.Load(), "Pool.Close returned before the pool was closed")
	require.True(t, b.c.closing.TryLock(), "Pool.Close returned before the tenant's close finished")
	b.c.closing.Unlock()
	_ = drv
	require.ErrorIs(t, q.Shutdown(nil), ErrInvalidArgument) //nolint:staticcheck // a nil ctx is the point
}
