package fcsp

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 38 #17. The "tenant created" line says the limit a tenant has: a
// share or floor tenant's said sm_limit=0 and nothing of its share.
func TestTenantCreatedLogSaysItsLimit(t *testing.T) {
	var buf bytes.Buffer
	p, _ := openSim(t, WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	line := func(name string, opts ...TenantOption) string {
		buf.Reset()
		tn, err := p.NewTenant(name, opts...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = tn.Close() })
		for l := range strings.SplitSeq(buf.String(), "\n") {
			if strings.Contains(l, "tenant created") {
				return l
			}
		}
		t.Fatalf("no tenant created line for %s in %q", name, buf.String())
		return ""
	}
	share := line("share", WithGPUShare(0.3))
	require.Contains(t, share, "gpu_share=0.3")
	require.NotContains(t, share, "sm_limit")
	floor := line("floor", WithBandwidthFloor(0.25))
	require.Contains(t, floor, "bandwidth_floor=0.25")
	require.NotContains(t, floor, "sm_limit=0")
	limited := line("limited", WithSMs(16), WithSMLimit(0.5))
	require.Contains(t, limited, "sm_limit=0.5")
	require.Contains(t, limited, "partitioned=true")
}

// Issue 38: a pool opened under an MPS client limit or an LD_PRELOAD
// interception layer says so, in DeviceInfo and as a warning.
func TestOpenSaysWherePartitionsCannotHold(t *testing.T) {
	var buf bytes.Buffer
	p, _ := openSim(t, WithLogger(slog.New(slog.NewTextHandler(&buf, nil))),
		WithEnviron([]string{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=12", "LD_PRELOAD=/opt/hami/libvgpu.so"}))
	require.Len(t, p.Device().Caveats, 2, "%v", p.Device().Caveats)
	require.Equal(t, 2, strings.Count(buf.String(), "level=WARN msg=\"fcsp pool: partitions may not hold here\""), buf.String())
	q, _ := openSim(t, WithEnviron([]string{}))
	require.Empty(t, q.Device().Caveats)
}

// Issue 38 #5, #6. An explicit Close with a live allocation says so in its
// own words (it logged "tenant reclaimed ... why=\"\"", the collector's
// line); after Close, SetSMLimit is ErrClosed (it answered nil and Stats
// showed the new limit) and Context is 0 (it was the destroyed handle).
func TestExplicitCloseSaysWhatItDid(t *testing.T) {
	var buf bytes.Buffer
	p, _ := openSim(t, WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	tn, err := p.NewTenant("t", WithSMs(16), WithSMLimit(0.5))
	require.NoError(t, err)
	_, err = tn.Alloc(t.Context(), 1<<20)
	require.NoError(t, err)
	require.NotZero(t, tn.Context())
	require.NoError(t, tn.Close())
	require.Contains(t, buf.String(), `msg="tenant closed with live allocations, which Close freed" tenant=t why=Tenant.Close leaked_allocations=1`)
	require.NotContains(t, buf.String(), "tenant reclaimed")
	require.ErrorIs(t, tn.SetSMLimit(0.25), ErrClosed)
	require.Equal(t, 0.5, tn.Stats().SMLimit)
	require.Zero(t, tn.Context())
}
