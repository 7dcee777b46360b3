package fcsp

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// Issue 27 #10: library handles made inside Do must be destroyed on the
// tenant's context before it closes, however it closes; OnClose runs the
// registered cleanup there, once, in order, also when the tenant ends with
// its context or its pool, and a panicking cleanup does not stop the close.
func TestOnCloseRunsOnTheTenantsContext(t *testing.T) {
	for _, how := range []string{"Close", "context", "pool", "panic"} {
		t.Run(how, func(t *testing.T) {
			p, drv := openSim(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			opts := []TenantOption{WithSMs(8)}
			if how == "context" {
				opts = append(opts, WithContext(ctx))
			}
			a, err := p.NewTenant("a", opts...)
			require.NoError(t, err)
			var order []int
			var inside cuda.Context
			require.NoError(t, a.OnClose(func(cur Current) error {
				var err error
				inside, err = drv.CtxGetCurrent()
				if err == nil {
					_, err = cur.Stream(nil) // usable: the streams are not destroyed yet
				}
				order = append(order, 1)
				return errors.Join(err, a.Close()) // ErrInsideDo, joined below
			}))
			require.NoError(t, a.OnClose(func(Current) error {
				order = append(order, 2)
				if how == "panic" {
					panic("cleanup failed")
				}
				return nil
			}))
			require.ErrorIs(t, a.OnClose(nil), ErrInvalidArgument)
			switch how {
			case "Close", "panic":
				err = a.Close()
			case "context":
				cancel()
				a.c.waitClosed()
			case "pool":
				err = p.Close()
			}
			if how != "context" { // a context's close has no caller to tell
				require.ErrorIs(t, err, ErrInsideDo, "the Close inside the cleanup was refused")
			}
			if how == "panic" {
				require.ErrorContains(t, err, "cleanup failed")
			}
			require.Equal(t, []int{1, 2}, order)
			require.True(t, a.c.partition().Owns(inside), "the cleanup ran with one of the tenant's green contexts current")
			require.True(t, a.c.closed.Load())
			require.ErrorIs(t, a.OnClose(func(Current) error { return nil }), ErrClosed)
			require.NoError(t, a.Close(), "once")
			require.Equal(t, []int{1, 2}, order)
			require.Zero(t, drv.Overlaps())
		})
	}
}
