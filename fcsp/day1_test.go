package fcsp

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestQuotaLargerThanTheDeviceIsRefused(t *testing.T) {
	p, _ := openSim(t)
	_, err := p.NewTenant("big", WithMemoryQuota(200<<30))
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Contains(t, err.Error(), "device's memory")
	require.Empty(t, p.Tenants(), "nothing left behind")

	pe, _ := openSim(t, WithEnviron([]string{"CUDA_DEVICE_MEMORY_LIMIT=4g"}))
	_, err = pe.NewTenant("big", WithMemoryQuota(32<<30))
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Contains(t, err.Error(), "CUDA_DEVICE_MEMORY_LIMIT")
	a, err := pe.NewTenant("a", WithMemoryQuota(4<<30))
	require.NoError(t, err)
	_, total, err := a.MemGetInfo()
	require.NoError(t, err)
	require.Equal(t, a.Stats().MemoryLimit, total, "Stats and MemGetInfo agree")
	d, err := pe.NewTenant("default") // no quota: the device's limit
	require.NoError(t, err)
	_, total, err = d.MemGetInfo()
	require.NoError(t, err)
	require.Equal(t, uint64(4<<30), d.Stats().MemoryLimit)
	require.Equal(t, d.Stats().MemoryLimit, total)
}

func TestErrorsNameTheTenantOnce(t *testing.T) {
	p, _ := openSim(t)
	a, err := p.NewTenant("t", WithMemoryQuota(1<<20))
	require.NoError(t, err)
	_, err = a.Alloc(context.Background(), 2<<20)
	require.ErrorIs(t, err, ErrQuotaExceeded)
	require.Equal(t, 1, strings.Count(err.Error(), `"t"`), err.Error())
	err = a.Free(0x1234)
	require.ErrorIs(t, err, ErrUnknownPointer)
	require.Equal(t, 1, strings.Count(err.Error(), `"t"`), err.Error())
	require.Equal(t, 1, strings.Count(err.Error(), "0x1234"), err.Error())
}

func TestPoolStatsAndTenantByName(t *testing.T) {
	p, _ := openSim(t)
	a, err := p.NewTenant("a", WithSMs(8), WithMemoryQuota(64<<20))
	require.NoError(t, err)
	b, err := p.NewTenant("b")
	require.NoError(t, err)
	_, err = a.Alloc(context.Background(), 1<<20)
	require.NoError(t, err)

	got, ok := p.Tenant("a")
	require.True(t, ok)
	require.Same(t, a, got)
	_, ok = p.Tenant("nobody")
	require.False(t, ok)

	s := p.Stats()
	require.Equal(t, p.Device(), s.Device)
	require.Equal(t, uint64(32<<20), s.MemoryUsed, "the device limit counts the 32 MiB chunk a's pool mapped")
	require.Equal(t, p.MemoryLimit(), s.MemoryLimit)
	require.Len(t, s.Tenants, 2)
	require.Equal(t, "a", s.Tenants[0].Name)
	require.Equal(t, 8, s.Tenants[0].SMs)
	require.Equal(t, uint64(1<<20), s.Tenants[0].MemoryUsed)
	require.Equal(t, uint64(64<<20), s.Tenants[0].MemoryLimit)

	require.NoError(t, b.Close())
	_, ok = p.Tenant("b")
	require.False(t, ok, "closed")
	require.Len(t, p.Stats().Tenants, 1)
	runtime.KeepAlive(a)
}
