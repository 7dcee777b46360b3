package fcsp

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRestIncludesTheRemainder(t *testing.T) {
	p, drv := openSim(t)
	lat, err := p.NewTenant("interactive", WithSMs(16))
	require.NoError(t, err)
	batch, err := p.NewTenant("batch", WithRestOfSMs())
	require.NoError(t, err)
	require.Equal(t, 116, batch.SMs(), "13 groups of 8 and the 12 SMs the split leaves over, as the H200 built")
	require.Zero(t, p.Stats().FreeSMs)
	_, err = p.NewTenant("leftover", WithRemainderSMs())
	require.ErrorIs(t, err, ErrInsufficientSMs)
	require.Contains(t, err.Error(), "remainder of 12 SMs is already part of a partition")
	require.NoError(t, batch.Close())
	require.Equal(t, 116, p.Stats().FreeSMs, "the remainder returns with the groups")

	small, err := p.NewTenant("leftover", WithRemainderSMs())
	require.NoError(t, err)
	require.Equal(t, 12, small.SMs())
	require.True(t, small.Stats().Partitioned)
	batch, err = p.NewTenant("batch", WithRestOfSMs())
	require.NoError(t, err)
	require.Equal(t, 104, batch.SMs(), "the remainder is taken: groups only")
	require.Zero(t, p.Stats().FreeSMs)
	for _, c := range []*Tenant{lat, small, batch} {
		require.NoError(t, c.Close())
	}
	require.Equal(t, 132, p.Stats().FreeSMs)
	requireNoGreenHeld(t, p, drv)
}

func TestWithoutCoscheduling(t *testing.T) {
	p, drv := openSim(t, WithoutCoscheduling())
	require.Equal(t, 132, p.Stats().FreeSMs)
	lat, err := p.NewTenant("interactive", WithSMs(16))
	require.NoError(t, err)
	batch, err := p.NewTenant("batch", WithRestOfSMs())
	require.NoError(t, err)
	require.Equal(t, 116, batch.SMs(), "14 groups of 8 and the 4 SMs left over")
	require.NoError(t, batch.Close())
	big, err := p.NewTenant("big", WithSMs(112))
	require.NoError(t, err, "16 groups of 8 when co-scheduling is ignored: 16 + 112 = 128")
	rem, err := p.NewTenant("rem", WithRemainderSMs())
	require.NoError(t, err)
	require.Equal(t, 4, rem.SMs())
	require.Zero(t, p.Stats().FreeSMs)
	for _, c := range []*Tenant{lat, big, rem} {
		require.NoError(t, c.Close())
	}
	requireNoGreenHeld(t, p, drv)
}

func TestSMShare(t *testing.T) {
	p, _ := openSim(t)
	for _, tc := range []struct {
		share float64
		sms   int
	}{
		{0.25, 32}, // 33 SMs asked: 4 groups is nearest
		{0.01, 8},  // less than a group: one group
		{0.5, 64},  // 66: 8 groups (8.25)
		{0.1, 16},  // 13.2: 2 groups (1.65)
		{1, 120},   // every group the split made
		{0.999, 120},
	} {
		c, err := p.NewTenant("t", WithSMShare(tc.share))
		require.NoError(t, err, "share %v", tc.share)
		require.Equal(t, tc.sms, c.SMs(), "share %v", tc.share)
		require.InDelta(t, float64(tc.sms)/132, c.Stats().SMShare, 1e-9)
		require.Equal(t, tc.sms, c.Stats().SMs)
		require.NoError(t, c.Close())
	}
	shared, err := p.NewTenant("shared")
	require.NoError(t, err)
	require.Equal(t, 1.0, shared.Stats().SMShare)
	require.NoError(t, shared.Close())
}

func TestShapeBadInput(t *testing.T) {
	p, drv := openSim(t)
	greens := drv.Calls("cuGreenCtxCreate")
	for _, tc := range []struct {
		name string
		opts []TenantOption
		msg  string
	}{
		{"zero share", []TenantOption{WithSMShare(0)}, "want a fraction in (0, 1]"},
		{"negative share", []TenantOption{WithSMShare(-0.5)}, "want a fraction in (0, 1]"},
		{"share above one", []TenantOption{WithSMShare(1.5)}, "want a fraction in (0, 1]"},
		{"NaN share", []TenantOption{WithSMShare(math.NaN())}, "want a fraction in (0, 1]"},
		{"infinite share", []TenantOption{WithSMShare(math.Inf(1))}, "want a fraction in (0, 1]"},
		{"share and SMs", []TenantOption{WithSMShare(0.5), WithSMs(8)}, "choose one"},
		{"remainder and rest", []TenantOption{WithRemainderSMs(), WithRestOfSMs()}, "choose one"},
		{"SMs and rest", []TenantOption{WithSMs(8), WithRestOfSMs()}, "choose one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.NewTenant("t", tc.opts...)
			require.ErrorIs(t, err, ErrInvalidArgument)
			require.Contains(t, err.Error(), tc.msg)
		})
	}
	require.Empty(t, p.Tenants(), "nothing was made")
	require.Equal(t, 132, p.Stats().FreeSMs)
	require.Equal(t, greens, drv.Calls("cuGreenCtxCreate"), "no green context was built")
}
