package fcsp

import (
	"context"
	"testing"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/stretchr/testify/require"
)

// In an MPS client with an active-thread percentage the H200's driver
// refused to split the SMs (CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION at
// cuDevSmResourceSplitByCount), so Open failed and no tenant could be made.
// The pool now opens without partitions: unpartitioned tenants work, and a
// partition request says why it cannot be had.
func TestOpenWhereTheDeviceCannotBeSplit(t *testing.T) {
	var drv *fake.Driver
	p, err := Open(context.Background(), 0, withDriver(func() cuda.Driver {
		drv = fake.New(fake.H200())
		fake.RegisterKernels(drv)
		for range 4 { // every split Open may try
			drv.FailNext("cuDevSmResourceSplitByCount", cuda.ErrorInvalidResourceConfig)
		}
		return drv
	}, true))
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	require.Zero(t, p.Device().PartitionUnit)
	require.Zero(t, p.Stats().FreeSMs)
	a, err := p.NewTenant("a")
	require.NoError(t, err)
	ptr, err := a.Alloc(context.Background(), 1<<20)
	require.NoError(t, err)
	require.NoError(t, a.Free(ptr))
	_, err = p.NewTenant("b", WithSMs(16))
	require.ErrorIs(t, err, ErrNotAvailable)
	require.ErrorContains(t, err, "cannot be partitioned")
	_, err = p.NewTenant("c", WithRestOfSMs())
	require.ErrorIs(t, err, ErrNotAvailable)
	require.NoError(t, a.Close())
}
