package fcsp

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// The triad kernel runs on the simulator (its Go model), and with its
// bytes declared a metered tenant reports the bandwidth its modelled time
// implies.
func TestTriadOnSimulatorReportsBandwidth(t *testing.T) {
	p, drv := openSim(t)
	const n = 4096
	drv.SetKernelDuration("triad", func(_, _ cuda.Dim3) time.Duration { return 10 * time.Microsecond })
	tn, err := p.NewTenant("triad", WithSMs(16), WithGPUMetering())
	require.NoError(t, err)
	defer tn.Close()
	mod, err := tn.LoadModule(kernels.TriadPTX)
	require.NoError(t, err)
	fn, err := mod.Function("triad")
	require.NoError(t, err)
	fn.SetBytesMoved(kernels.TriadBytes(n))

	ctx := t.Context()
	var bufs [3]DevicePtr
	host := [3][]byte{make([]byte, 4*n), make([]byte, 4*n), make([]byte, 4*n)}
	for i := range n {
		binary.LittleEndian.PutUint32(host[1][4*i:], math.Float32bits(float32(i)))
		binary.LittleEndian.PutUint32(host[2][4*i:], math.Float32bits(1/float32(i+1)))
	}
	for i := range bufs {
		bufs[i], err = tn.Alloc(ctx, 4*n)
		require.NoError(t, err)
		require.NoError(t, tn.CopyToDevice(bufs[i], host[i]))
	}
	var a Args
	a.Ptr(bufs[0]).Ptr(bufs[1]).Ptr(bufs[2]).Float32(3).Uint32(n)
	for range 10 {
		require.NoError(t, tn.Stream().Launch(ctx, fn, Dim3{X: 128, Y: 1, Z: 1}, Dim3{X: 256, Y: 1, Z: 1}, 0, &a))
	}
	require.NoError(t, tn.Stream().Synchronize())
	require.NoError(t, tn.CopyFromDevice(host[0], bufs[0]))
	require.NoError(t, kernels.CheckTriad(host[0], host[1], host[2], 3))

	bs := tn.Stats().Bandwidth
	require.Equal(t, 10*kernels.TriadBytes(n), bs.BytesMoved)
	require.InEpsilon(t, float64(kernels.TriadBytes(n))/10e-6, bs.BytesPerSecond, 1e-3) // 4.9 GB/s
	require.InDelta(t, 1, bs.Slowdown, 1e-3)
}
