package smpart_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

func TestFakeH200(t *testing.T) {
	drv := fake.New(fake.H200())
	fake.RegisterKernels(drv)
	exerciseDevice(t, drv)
	live := drv.Live()
	require.Zero(t, live.GreenCtxs, "green contexts leaked")
	require.Zero(t, live.Streams, "streams leaked")
	require.Zero(t, live.Bytes, "device memory leaked")
	require.Zero(t, live.PrimaryRefs, "primary context still retained")
}

func TestFakeT4(t *testing.T) {
	drv := fake.New(fake.T4())
	fake.RegisterKernels(drv)
	exerciseDevice(t, drv)
}

// fakeSplit opens the fake H200's device, closed when the test ends (after
// its deferred calls, which close its partitions), and splits it into
// groups of group SMs.
func fakeSplit(t testing.TB, group int) (*fake.Driver, *smpart.Device, *smpart.Split) {
	t.Helper()
	drv := fake.New(fake.H200())
	d, err := smpart.Open(drv, 0)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	s, err := d.Split(group)
	require.NoError(t, err)
	return drv, d, s
}
