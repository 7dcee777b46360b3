package fcsp

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// A stream made and closed with nothing queued on it, the way a server
// makes one per request that ends early, costs no driver call once the
// tenant keeps idle streams; a stream that had work, or whose handle left
// the SDK, is still waited for at Close.
func TestStreamClosedUnusedIsNotWaitedFor(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []TenantOption
	}{
		{"partitioned", []TenantOption{WithSMs(16)}},
		{"unpartitioned", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, drv := openSim(t)
			tn, err := p.NewTenant("a", tc.opts...)
			require.NoError(t, err)
			s, err := tn.NewStream(ClassDefault)
			require.NoError(t, err)
			require.NoError(t, s.Close()) // one kept idle from here
			syncs := drv.Calls("cuStreamSynchronize")
			for range 20 {
				s, err := tn.NewStream(ClassDefault)
				require.NoError(t, err)
				require.NoError(t, s.Close())
			}
			require.Equal(t, syncs, drv.Calls("cuStreamSynchronize"), "an unused stream's Close waited")

			fn := spinKernel(t, tn)
			var a Args
			a.Uint64(0)
			one := Dim3{X: 1, Y: 1, Z: 1}
			s, err = tn.NewStream(ClassDefault)
			require.NoError(t, err)
			require.NoError(t, s.Launch(context.Background(), fn, one, one, 0, &a))
			syncs = drv.Calls("cuStreamSynchronize")
			require.NoError(t, s.Close())
			require.Greater(t, drv.Calls("cuStreamSynchronize"), syncs, "a stream with a launch was not waited for")

			s, err = tn.NewStream(ClassDefault)
			require.NoError(t, err)
			_ = s.Handle() // the caller may queue on it through another binding
			syncs = drv.Calls("cuStreamSynchronize")
			require.NoError(t, s.Close())
			require.Greater(t, drv.Calls("cuStreamSynchronize"), syncs, "a stream whose handle was taken was not waited for")
		})
	}
}

// ReadStats reuses what its PoolStats holds: a polling loop makes no
// garbage. Its figures are Stats's.
func TestReadStatsMakesNoGarbage(t *testing.T) {
	p, _ := openSim(t)
	a, err := p.NewTenant("a", WithSMs(16))
	require.NoError(t, err)
	b, err := p.NewTenant("b", WithRestOfSMs())
	require.NoError(t, err)
	var s PoolStats
	p.ReadStats(&s)
	require.Equal(t, p.Stats(), s)
	require.Equal(t, 0.0, testing.AllocsPerRun(100, func() { p.ReadStats(&s) }))
	require.NoError(t, b.Close())
	p.ReadStats(&s)
	require.Len(t, s.Tenants, 1, "a closed tenant's figures are not left behind")
	require.Equal(t, "a", s.Tenants[0].Name)
	runtime.KeepAlive(a) // a tenant nothing refers to is closed when collected
	p.ReadStats(nil)     // no panic
}

// A request's Do makes no garbage, its closure included: a goroutine that
// allocates while the collector runs is made to help it, on the request's
// time. (Do took f as an interface for the metering's key, which made
// every closure passed to it escape.)
func TestDoMakesNoGarbage(t *testing.T) {
	p, _ := openSim(t)
	for _, tc := range []struct {
		name string
		opts []TenantOption
	}{{"partitioned", []TenantOption{WithSMs(16)}}, {"unpartitioned", nil}} {
		tn, err := p.NewTenant(tc.name, tc.opts...)
		require.NoError(t, err)
		ctx := context.Background()
		n := 0
		require.NoError(t, tn.Do(ctx, func(Current) error { n++; return nil })) // the first makes what it needs
		allocs := testing.AllocsPerRun(100, func() {
			_ = tn.Do(ctx, func(Current) error { n++; return nil })
		})
		require.Zero(t, allocs, "%s: a Do made garbage", tc.name)
		require.NoError(t, tn.Close())
	}
}

// A tenant with many streams (one per request goroutine) reads its Stats
// without garbage: the H200 stats storm made 240 MB/s of it through a
// copy of the streams' gates.
func TestStatsOfManyStreamsMakeNoGarbage(t *testing.T) {
	p, _ := openSim(t)
	tn, err := p.NewTenant("t", WithSMs(16))
	require.NoError(t, err)
	for range 40 {
		_, err := tn.NewStream(ClassDefault)
		require.NoError(t, err)
	}
	var ps PoolStats
	p.ReadStats(&ps)
	require.Equal(t, 41, ps.Tenants[0].Streams)
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = tn.Stats() }))
	require.Zero(t, testing.AllocsPerRun(100, func() { p.ReadStats(&ps) }))
}

// A pool of more tenants than ReadStats's list on the stack holds (a server
// with a class per model, or a storm's short-lived tenants) is read without
// garbage too: the list of 40 grew a new array at every call.
func TestReadStatsOfManyTenantsMakesNoGarbage(t *testing.T) {
	p, _ := openSim(t)
	var ts []*Tenant
	for i := range 40 {
		tn, err := p.NewTenant(fmt.Sprintf("t%02d", i), WithMemoryQuota(1<<20))
		require.NoError(t, err)
		ts = append(ts, tn)
	}
	var ps PoolStats
	p.ReadStats(&ps)
	require.Len(t, ps.Tenants, 40)
	if allocs := testing.AllocsPerRun(100, func() { p.ReadStats(&ps) }); !raceEnabled {
		require.Zero(t, allocs)
	}
	require.Equal(t, "t00", ps.Tenants[0].Name)
	require.Equal(t, "t39", ps.Tenants[39].Name)
	runtime.KeepAlive(ts)
}
