package fcsp

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/kernels"
)

// gpuTriad is a tenant's triad over three arrays of n floats.
type gpuTriad struct {
	t       *Tenant
	fn      *Function
	n       int
	a, b, c DevicePtr
	args    Args
	grid    Dim3
}

func newGPUTriad(t *testing.T, tn *Tenant, n int) *gpuTriad {
	t.Helper()
	ctx := context.Background()
	mod, err := tn.LoadModule(kernels.TriadPTX)
	require.NoError(t, err)
	tr := &gpuTriad{t: tn, n: n, grid: Dim3{X: uint32(8 * tn.SMs()), Y: 1, Z: 1}}
	tr.fn, err = mod.Function("triad")
	require.NoError(t, err)
	tr.fn.SetBytesMoved(kernels.TriadBytes(n))
	for _, p := range []*DevicePtr{&tr.a, &tr.b, &tr.c} {
		*p, err = tn.Alloc(ctx, 4*uint64(n))
		require.NoError(t, err)
	}
	s := tn.Stream()
	require.NoError(t, s.MemsetD32(tr.b, math.Float32bits(1.5), uint64(n)))
	require.NoError(t, s.MemsetD32(tr.c, math.Float32bits(2), uint64(n)))
	require.NoError(t, s.Synchronize())
	tr.args.Ptr(tr.a).Ptr(tr.b).Ptr(tr.c).Float32(3).Uint32(uint32(n))
	return tr
}

func (tr *gpuTriad) launch(s *Stream) error {
	return s.Launch(context.Background(), tr.fn, tr.grid, Dim3{X: 256, Y: 1, Z: 1}, 0, &tr.args)
}

// requests runs n triads on the tenant's stream, each synchronised, one
// every interval, and returns their latencies (sorted).
func (tr *gpuTriad) requests(t *testing.T, n int, interval time.Duration) []time.Duration {
	t.Helper()
	s := tr.t.Stream()
	lats := make([]time.Duration, 0, n)
	t0 := time.Now()
	for i := range n {
		time.Sleep(time.Until(t0.Add(time.Duration(i) * interval)))
		st := time.Now()
		require.NoError(t, tr.launch(s))
		require.NoError(t, s.Synchronize())
		lats = append(lats, time.Since(st))
	}
	slices.Sort(lats)
	return lats
}

// neighbourTriads runs tr back to back (two in flight) until stop, and
// returns how many it launched.
func neighbourTriads(t *testing.T, tr *gpuTriad, stop *atomic.Bool) func() int {
	var evs [2]*Event
	for i := range evs {
		var err error
		evs[i], err = tr.t.NewEvent()
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	var n int
	var errv error
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := tr.t.Stream()
		for i := 0; !stop.Load(); i++ {
			e := evs[i%2]
			if i >= 2 {
				if errv = e.Synchronize(); errv != nil {
					return
				}
			}
			if errv = errors.Join(tr.launch(s), e.Record(s)); errv != nil {
				return
			}
			n++
		}
		errv = s.Synchronize()
	}()
	return func() int {
		stop.Store(true)
		wg.Wait()
		require.NoError(t, errv)
		return n
	}
}

// On the H200: a 16-SM tenant's triad reports its achieved bandwidth and a
// slowdown of about 1 alone; beside a memory-bound neighbour on the other
// SMs its slowdown rises (the probe: 808 GB/s alone, 548 beside);
// with the neighbour floored at 0.1 while the latency tenant is busy, its
// median request is faster than beside the unfloored neighbour. Numbers are
// logged; about 3 s of GPU time (three phases of 200 requests, one every
// 2 ms).
func TestGPUBandwidthVisibleAndFloored(t *testing.T) {
	bandwidthFloorCheck(t, openGPU(t), 32<<20, 16<<20, true)
}

// The same on the simulator, where kernels take no time: every path runs
// (the triads are computed and checked), the figures are not asserted.
func TestBandwidthFloorCheckRunsOnSimulator(t *testing.T) {
	p, _ := openSim(t)
	bandwidthFloorCheck(t, p, 4096, 4096, false)
}

// bandwidthFloorCheck runs the latency tenant's triads over n floats and
// the neighbour's over nn.
func bandwidthFloorCheck(t *testing.T, p *Pool, n, nn int, gpu bool) {
	lat, err := p.NewTenant("latency", WithSMs(16), WithPriority(LatencyCritical))
	require.NoError(t, err)
	defer lat.Close()
	tr := newGPUTriad(t, lat, n) // on the GPU 128 MiB arrays: 384 MiB per request
	for range 3 {                // JIT, first touches
		require.NoError(t, tr.launch(lat.Stream()))
	}
	require.NoError(t, lat.Stream().Synchronize())
	k := min(4*n, 1<<20)
	out, b, c := make([]byte, k), make([]byte, k), make([]byte, k)
	require.NoError(t, errors.Join(lat.CopyFromDevice(out, tr.a), lat.CopyFromDevice(b, tr.b), lat.CopyFromDevice(c, tr.c)))
	require.NoError(t, kernels.CheckTriad(out, b, c, 3))

	reqs, interval := 200, 2*time.Millisecond
	if !gpu {
		reqs, interval = 20, 100*time.Microsecond
	}
	alone := tr.requests(t, reqs, interval)
	as := lat.Stats().Bandwidth
	t.Logf("alone: P50 %v P99 %v; GPU clock %.1f GB/s, slowdown %.3f", alone[reqs/2], alone[reqs*99/100], as.BytesPerSecond/1e9, as.Slowdown)
	require.False(t, p.Stats().LatencyBusy)
	if gpu {
		require.Greater(t, as.BytesPerSecond, 200e9, "a 16-SM triad on the H200 (808 GB/s probed)")
		require.InDelta(t, 1, as.Slowdown, 0.2)
	}

	beside := func(name string, opts ...TenantOption) ([]time.Duration, BandwidthStats, Stats, float64) {
		nb, err := p.NewTenant(name, append([]TenantOption{WithRestOfSMs(), WithGPUMetering()}, opts...)...)
		require.NoError(t, err)
		defer nb.Close()
		ntr := newGPUTriad(t, nb, nn)
		var stop atomic.Bool
		done := neighbourTriads(t, ntr, &stop)
		time.Sleep(20 * time.Millisecond) // the neighbour at full speed
		st := time.Now()
		lats := tr.requests(t, reqs, interval)
		n := done()
		perS := float64(n) / time.Since(st).Seconds()
		return lats, lat.Stats().Bandwidth, nb.Stats(), perS
	}
	mem, ms, _, memPerS := beside("memory")
	t.Logf("beside a memory-bound neighbour: P50 %v P99 %v; GPU clock %.1f GB/s, slowdown %.3f; neighbour %.0f triads/s",
		mem[reqs/2], mem[reqs*99/100], ms.BytesPerSecond/1e9, ms.Slowdown, memPerS)
	if gpu {
		require.Greater(t, ms.Slowdown, 1.05, "the shared memory bandwidth slows the latency tenant's triad")
	}

	fl, fs, nbs, flPerS := beside("floored", WithBandwidthFloor(0.1), WithTenantRefillPeriod(200*time.Microsecond))
	t.Logf("beside it floored at 0.1: P50 %v P99 %v; GPU clock %.1f GB/s, slowdown %.3f; neighbour %.0f triads/s (%.3f of unfloored), %d launches floored",
		fl[reqs/2], fl[reqs*99/100], fs.BytesPerSecond/1e9, fs.Slowdown, flPerS, flPerS/memPerS, nbs.Bandwidth.FlooredLaunches)
	if gpu {
		require.NotZero(t, nbs.Bandwidth.FlooredLaunches)
		require.Less(t, fl[reqs/2], mem[reqs/2], "the floor bought nothing back")
	}
	require.False(t, p.Stats().LatencyBusy, "latency tenant still seen busy after its last Synchronize")
}
