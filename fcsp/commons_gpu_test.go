package fcsp

import (
	"context"
	"testing"
	"time"

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

// The commons' hand-over on the device: a 16-SM class grows to 32 while a
// plain tenant's blocks fill every SM of the commons (two of 1024 threads
// per SM, ~8 ms). The class's first kernel after the growth, two such
// blocks per SM of its 32, runs in one wave, as long as 32 blocks take
// alone on 16 SMs: the growth waited (at most 15 ms) for the plain
// tenant's blocks to leave the SMs it took. The same growth with no wait
// (the pool's bound 0, as before the hand-over covered the commons) finds
// its new SMs full and takes two waves on its old ones (H100: 1.95x).
func TestGPUGrowthWaitsForThePlainTenantsWork(t *testing.T) {
	p := openGPU(t)
	ctx := context.Background()
	plain, err := p.NewTenant("plain")
	require.NoError(t, err)
	defer plain.Close()
	lat, err := p.NewTenant("interactive", WithSMs(16), WithReshapeSizes(16, 32))
	require.NoError(t, err)
	defer lat.Close()
	spinP, spinL := spinKernel(t, plain), spinKernel(t, lat)
	block := Dim3{X: 1024, Y: 1, Z: 1}
	start := func(tn *Tenant, fn *Function, blocks int, cycles uint64) {
		var a Args
		a.Uint64(cycles)
		require.NoError(t, tn.Stream().Launch(ctx, fn, Dim3{X: uint32(blocks), Y: 1, Z: 1}, block, 0, &a))
	}
	run := func(tn *Tenant, fn *Function, blocks int, cycles uint64) time.Duration {
		began := time.Now()
		start(tn, fn, blocks, cycles)
		require.NoError(t, tn.Stream().Synchronize())
		return time.Since(began)
	}
	const probe = 1 << 22
	d := run(plain, spinP, 1, probe)
	busy := uint64(float64(probe) * float64(8*time.Millisecond) / float64(d))
	short := busy / 40
	alone := run(lat, spinL, 2*16, short)
	grow := func() (reshape, first time.Duration) {
		require.Equal(t, 16, lat.SMs())
		start(plain, spinP, 2*plain.SMs(), busy)
		time.Sleep(time.Millisecond) // its blocks are resident
		began := time.Now()
		require.NoError(t, lat.Reshape(ctx, 32))
		reshape = time.Since(began)
		first = run(lat, spinL, 2*32, short)
		require.NoError(t, plain.Stream().Synchronize())
		require.NoError(t, lat.Reshape(ctx, 16))
		return reshape, first
	}
	rWait, fWait := grow()
	p.moves.SetHandOff(0) // nothing else reads it now: no controller runs here
	rNo, fNo := grow()
	t.Logf("plain tenant's blocks ~8 ms on its %d SMs; the class's kernel alone on 16 SMs %v; "+
		"growth 16->32 waiting: Reshape %v, first kernel %v; not waiting: Reshape %v, first kernel %v",
		plain.SMs(), alone, rWait, fWait, rNo, fNo)
	require.Less(t, fWait, alone*3/2, "the first kernel after the growth met the plain tenant's blocks on its new SMs")
	require.Greater(t, fNo, alone*3/2, "with no wait its new SMs should be full of the plain tenant's blocks: the test shows nothing")
}
