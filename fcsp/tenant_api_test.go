package fcsp

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A tenant reachable only through a call in flight on it must live until
// that call returns: the handle's methods keep it alive as os.File's do.
func TestTenantInFlightCallKeepsItAlive(t *testing.T) {
	p, _ := openSim(t)
	newTenant := func() *Tenant {
		tn, err := p.NewTenant("in-flight", WithSMs(8))
		require.NoError(t, err)
		return tn
	}
	err := newTenant().Scope(context.Background(), func(s *Scope) error {
		// Give the collector every chance to run the handle's cleanup.
		for range 20 {
			runtime.GC()
			time.Sleep(time.Millisecond)
			if len(p.Tenants()) == 0 {
				break
			}
		}
		require.Equal(t, []string{"in-flight"}, p.Tenants(), "the tenant was collected under a call in flight")
		_, err := s.Alloc(1 << 20)
		return err
	})
	require.NoError(t, err)
	// Once the call returned, nothing holds the tenant: it is reclaimed.
	require.Eventually(t, func() bool { runtime.GC(); return len(p.Tenants()) == 0 }, 5*time.Second, 5*time.Millisecond)
	require.Zero(t, p.MemoryUsed())
}

// waitClosed waits for a close started elsewhere (a context's, the
// collector's) to finish: the closed flag is set under the closing lock,
// which the close holds until its end.
func (c *tenantCore) waitClosed() {
	for !c.closed.Load() {
		time.Sleep(time.Millisecond)
	}
	c.closing.Lock()
	c.closing.Unlock() //nolint:staticcheck // the wait is the point
}
