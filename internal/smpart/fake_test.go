package smpart_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
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
