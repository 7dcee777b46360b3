package fcsp

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// gpuShareBeside measures the work rate (calls per second) of a 64-SM
// tenant made with share (a fresh tenant each time, so nothing learnt
// carries over) for dur, while the neighbour keeps the other 64 SMs busy;
// run(tn, fn) queues one call of the work. It returns the rate and the
// metered GPU time per call.
func gpuShareBeside(t *testing.T, p *Pool, share float64, dur time.Duration, run func(tn *Tenant, fn *Function) error) (perS float64, gpu time.Duration) {
	t.Helper()
	tn, err := p.NewTenant("limited", WithSMs(64), WithGPUShare(share))
	require.NoError(t, err)
	defer func() { require.NoError(t, tn.Close()) }()
	fn := spinKernel(t, tn)
	for range 4 { // warm up: the estimate learns the work's time
		require.NoError(t, run(tn, fn))
	}
	require.NoError(t, tn.Stream().Synchronize())
	before := tn.Stats().GPUTime
	start, n := time.Now(), 0
	for time.Since(start) < dur {
		require.NoError(t, run(tn, fn))
		if n++; n%16 == 0 {
			require.NoError(t, tn.Stream().Synchronize())
		}
	}
	require.NoError(t, tn.Stream().Synchronize())
	el := time.Since(start)
	return float64(n) / el.Seconds(), (tn.Stats().GPUTime - before) / time.Duration(n)
}

// neighbour keeps an unlimited 64-SM tenant busy with the spin kernel
// until the returned stop is called.
func neighbour(t *testing.T, p *Pool) (stop func()) {
	t.Helper()
	nb, err := p.NewTenant("neighbour", WithSMs(64))
	require.NoError(t, err)
	fn := spinKernel(t, nb)
	var a Args
	a.Uint64(1 << 20)
	quit, done := make(chan struct{}), make(chan error, 1)
	go func() {
		for n := 0; ; n++ {
			select {
			case <-quit:
				done <- nb.Stream().Synchronize()
				return
			default:
			}
			if err := nb.Stream().Launch(context.Background(), fn, Dim3{X: 256, Y: 1, Z: 1}, Dim3{X: 1024, Y: 1, Z: 1}, 0, &a); err != nil {
				done <- err
				return
			}
			if n%8 == 7 {
				if err := nb.Stream().Synchronize(); err != nil {
					done <- err
					return
				}
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(quit)
			require.NoError(t, <-done)
			require.NoError(t, nb.Close())
		})
	}
}

// doShares runs TestGPUDoShare's measurement on p for each kernel length:
// the fraction of its own unlimited rate a tenant limited to 0.25 gets.
func doShares(t *testing.T, p *Pool, dur time.Duration) []float64 {
	stop := neighbour(t, p)
	defer stop()
	grid, block := Dim3{X: 128, Y: 1, Z: 1}, Dim3{X: 1024, Y: 1, Z: 1}
	var fracs []float64
	// About 130 us and 1 ms. The bracket opens when f takes the stream, so
	// the CPU time from there to the kernel's start counts (a few us on an
	// idle stream): kernels much shorter would be over-charged by it.
	for _, cycles := range []uint64{1 << 18, 1 << 21} {
		var a Args
		a.Uint64(cycles)
		do := func(tn *Tenant, fn *Function) error {
			return tn.Do(context.Background(), func(cur Current) error {
				h, err := cur.Stream(nil)
				if err != nil {
					return err
				}
				return p.drv.LaunchKernel(tn.c.cctx(), fn.k.H, grid.cuda(), block.cuda(), 0, h.h, &a.a)
			})
		}
		full, k := gpuShareBeside(t, p, 1, dur, do)
		quarter, kq := gpuShareBeside(t, p, 0.25, dur, do)
		frac := quarter / full
		t.Logf("Do, spin %d cycles: %.3f ms per Do (metered); %.1f Do/s unlimited (device busy %.3f), %.1f Do/s at 0.25 (busy %.3f): fraction %.4f (band 0.2375..0.2625)",
			cycles, float64(k)/1e6, full, full*k.Seconds(), quarter, quarter*kq.Seconds(), frac)
		fracs = append(fracs, frac)
	}
	return fracs
}

// graphShares is doShares for a captured graph of 4 spin kernels replayed
// with LaunchGraph.
func graphShares(t *testing.T, p *Pool, dur time.Duration) []float64 {
	stop := neighbour(t, p)
	defer stop()
	grid, block := Dim3{X: 128, Y: 1, Z: 1}, Dim3{X: 1024, Y: 1, Z: 1}
	var fracs []float64
	for _, cycles := range []uint64{1 << 16, 1 << 19} { // graphs of about 130 us and 1 ms
		var a Args
		a.Uint64(cycles)
		execs := map[*Tenant]*GraphExec{}
		launch := func(tn *Tenant, fn *Function) error {
			e := execs[tn]
			if e == nil {
				s := tn.Stream()
				g, err := s.Capture(context.Background(), func() error {
					for range 4 {
						if err := s.Launch(context.Background(), fn, grid, block, 0, &a); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					return err
				}
				if e, err = g.Instantiate(); err != nil {
					return err
				}
				execs[tn] = e // the graph and exec are left for the tenant's Close
			}
			return tn.Stream().LaunchGraph(context.Background(), e)
		}
		full, k := gpuShareBeside(t, p, 1, dur, launch)
		quarter, kq := gpuShareBeside(t, p, 0.25, dur, launch)
		frac := quarter / full
		t.Logf("graph of 4 x spin %d cycles: %.3f ms per graph (metered); %.1f graphs/s unlimited (device busy %.3f), %.1f/s at 0.25 (busy %.3f): fraction %.4f (band 0.2375..0.2625)",
			cycles, float64(k)/1e6, full, full*k.Seconds(), quarter, quarter*kq.Seconds(), frac)
		fracs = append(fracs, frac)
	}
	return fracs
}

// On the H200: a tenant whose work goes through Do (the spin kernel
// launched with the raw driver on the stream Current gives, as a library
// would) limited to 0.25 beside an unlimited neighbour gets 0.25 +/-
// 0.0125 of its own unlimited throughput, for a short and a long kernel,
// with no tuning to either. About 5 s.
func TestGPUDoShare(t *testing.T) {
	p := openGPU(t, WithPartitionUnit(64))
	for _, frac := range doShares(t, p, time.Second) {
		require.InDelta(t, 0.25, frac, 0.0125)
	}
}

// On the H200: the same for a captured graph replayed with LaunchGraph.
// About 5 s.
func TestGPUGraphShare(t *testing.T) {
	p := openGPU(t, WithPartitionUnit(64))
	for _, frac := range graphShares(t, p, time.Second) {
		require.InDelta(t, 0.25, frac, 0.0125)
	}
}

// The GPU tests' flow (partitions, neighbour, Do with a raw launch,
// capture, LaunchGraph, Close with graphs left) runs without error on the
// simulator, so the one GPU run does not fail on a mistake of the test's
// own. Its fractions mean nothing here (kernels take no time).
func TestGPUShareTestsRunOnTheSimulator(t *testing.T) {
	p, _ := openSim(t, WithPartitionUnit(64))
	require.Len(t, doShares(t, p, 5*time.Millisecond), 2)
	require.Len(t, graphShares(t, p, 5*time.Millisecond), 2)
}
