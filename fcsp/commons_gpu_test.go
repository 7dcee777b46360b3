package fcsp

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/smprobe"
)

// Issue 37 on the device: the %smid probe (Pool.ProbeSMs) of a tenant made
// with no SM option runs on every SM while no partition exists, and on
// none of a 16-SM partition's beside one, before and after the partition
// reshapes (to 32 SMs and back), and after the partition closes on every
// SM again.
func TestGPUPlainTenantStaysOffThePartitions(t *testing.T) {
	p := openGPU(t)
	ctx := context.Background()
	n := p.Device().SMs
	plain, err := p.NewTenant("plain")
	require.NoError(t, err)
	defer plain.Close()
	probe := func(when string, wantPlain int) SMReport {
		r, err := p.ProbeSMs(ctx)
		require.NoError(t, err)
		t.Logf("%s: %d tenant(s); plain on %d SMs (%v)", when, len(r.SMs), len(r.SMs["plain"]), r.SMs["plain"])
		for name, sms := range r.SMs {
			t.Logf("  %s: %d SMs", name, len(sms))
		}
		require.True(t, r.Confined(), "%s: %v", when, r.Breaches)
		require.Len(t, r.SMs["plain"], wantPlain, when)
		return r
	}
	probe("no partition", n)
	inter, err := p.NewTenant("interactive", WithSMs(16), WithReshapeSizes(16, 32))
	require.NoError(t, err)
	for _, step := range []struct {
		when string
		sms  int
	}{{"beside a 16-SM partition", 16}, {"after it reshaped to 32", 32}, {"after it reshaped back to 16", 16}} {
		if step.sms != inter.SMs() {
			require.NoError(t, inter.Reshape(ctx, step.sms))
		}
		r := probe(step.when, n-step.sms)
		require.Len(t, r.SMs["interactive"], step.sms)
		require.Empty(t, smprobe.Overlap(r.SMs["plain"], r.SMs["interactive"]), "%s: blocks on the partition's SMs", step.when)
		t.Logf("%s: 0 of the plain tenant's SMs are the partition's", step.when)
	}
	require.NoError(t, inter.Close())
	probe("after the partition closed", n)
}
