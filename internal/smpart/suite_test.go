package smpart_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// referenceMinCounts are the rows of ../shared/reference's split table.
var referenceMinCounts = []int{1, 2, 4, 8, 9, 16, 24, 32, 64, 66}

// readSplitTable reads a fixture of measured split rows.
func readSplitTable(t *testing.T, path string) []smpart.Row {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var rows []smpart.Row
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		var r smpart.Row
		_, err := fmt.Sscanf(sc.Text(), "%d\t%d\t%d\t%d", &r.MinCount, &r.Groups, &r.GroupSMs, &r.Remainder)
		require.NoError(t, err)
		rows = append(rows, r)
	}
	return rows
}

// exerciseDevice is the behaviour every driver, fake or real, must show.
func exerciseDevice(t *testing.T, drv cuda.Driver) {
	dev, err := smpart.Open(drv, 0)
	require.NoError(t, err)
	defer func() { require.NoError(t, dev.Close()) }()
	name, _ := drv.DeviceName(0)
	t.Logf("%s: %s, driver API %d", name, dev.Info(), dev.APIVersion())
	require.Positive(t, dev.SMs())
	require.Positive(t, dev.Granularity())

	t.Run("prediction matches the driver", func(t *testing.T) {
		var counts []int
		for _, m := range referenceMinCounts {
			if m <= dev.SMs() {
				counts = append(counts, m)
			}
		}
		pred, meas, err := dev.Table(counts...)
		require.NoError(t, err)
		require.Equal(t, pred, meas, "the SDK predicted a different split than the driver made")
		if strings.Contains(name, "H200") {
			require.Equal(t, readSplitTable(t, "../../testdata/h200-split.tsv"), meas, "split table differs from the reference H200's")
		}
		if strings.Contains(name, "T4") {
			_, meas, err := dev.Table(1, 2, 3, 4, 8, 20)
			require.NoError(t, err)
			require.Equal(t, readSplitTable(t, "../../testdata/t4-split.tsv"), meas, "split table differs from the day-94 T4's")
		}
	})

	t.Run("bad requests name the granularity", func(t *testing.T) {
		s, err := dev.Split(dev.Granularity())
		require.NoError(t, err)
		g := s.GroupSMs()
		_, err = s.Take(g + g/2)
		require.ErrorIs(t, err, smpart.ErrGranularity)
		require.Contains(t, err.Error(), fmt.Sprintf("groups of %d", g))
		_, err = s.Take(0)
		require.ErrorIs(t, err, smpart.ErrGranularity)
		_, err = s.Take(s.Groups()*g + g)
		require.ErrorIs(t, err, smpart.ErrInsufficientSMs)
		_, err = dev.Split(dev.SMs() + 1)
		require.Error(t, err)
	})

	t.Run("a share's nearest size is whole groups, one to all", func(t *testing.T) {
		s, err := dev.Split(dev.Granularity())
		require.NoError(t, err)
		g, n := s.GroupSMs(), dev.SMs()
		require.Equal(t, g, s.Nearest(0.0001, n))
		require.Equal(t, s.Groups()*g, s.Nearest(1, n))
		if s.Groups() >= 3 {
			require.Equal(t, 2*g, s.Nearest(float64(2*g)/float64(n), n))
			require.Equal(t, 2*g, s.Nearest((float64(2*g)+0.4*float64(g))/float64(n), n), "rounded down")
			require.Equal(t, 3*g, s.Nearest((float64(2*g)+0.6*float64(g))/float64(n), n), "rounded up")
		}
	})

	ptx := kernels.ChainPTX
	run := func(t *testing.T, p *smpart.Partition, n, steps int) []byte {
		t.Helper()
		out := make([]byte, 4*n)
		require.NoError(t, p.Do(func(ctx cuda.Context) error {
			mod, err := drv.ModuleLoadData(ctx, ptx)
			if err != nil {
				return err
			}
			defer drv.ModuleUnload(ctx, mod)
			fn, err := drv.ModuleGetFunction(ctx, mod, "chain")
			if err != nil {
				return err
			}
			buf, err := drv.MemAlloc(ctx, uint64(4*n))
			if err != nil {
				return err
			}
			defer drv.MemFree(ctx, buf)
			// Poison first: a kernel that writes nothing must not pass.
			if err := drv.MemcpyHtoD(ctx, buf, bytes.Repeat([]byte{0xff}, 4*n)); err != nil {
				return err
			}
			var a cuda.Args
			a.Ptr(buf).Int32(int32(n)).Int32(int32(steps))
			grid := cuda.Dim3{X: uint32((n + 255) / 256), Y: 1, Z: 1}
			if err := drv.LaunchKernel(ctx, fn, grid, cuda.Dim3{X: 256, Y: 1, Z: 1}, 0, p.Stream(), &a); err != nil {
				return err
			}
			if err := drv.StreamSynchronize(ctx, p.Stream()); err != nil {
				return err
			}
			return drv.MemcpyDtoH(ctx, out, buf)
		}))
		require.NoError(t, kernels.CheckChain(out, steps))
		return out
	}

	t.Run("even partitions compute right on their own SMs", func(t *testing.T) {
		half := dev.SMs() / 2 / dev.Granularity() * dev.Granularity()
		s, err := dev.Split(half)
		require.NoError(t, err)
		a, err := s.Take(s.GroupSMs())
		require.NoError(t, err)
		defer a.Close()
		b, err := s.Take(s.GroupSMs())
		require.NoError(t, err)
		defer b.Close()
		require.Equal(t, s.GroupSMs(), a.SMs())
		require.Equal(t, s.GroupSMs(), b.SMs())
		_, err = s.Take(s.GroupSMs())
		require.ErrorIs(t, err, smpart.ErrInsufficientSMs)
		const n, steps = 64 << 10, 1024
		ra, rb := run(t, a, n, steps), run(t, b, n, steps)
		require.Equal(t, ra, rb, "two partitions computed different bits")
	})

	t.Run("uneven: smallest group for latency, the rest for batch", func(t *testing.T) {
		s, err := dev.Split(dev.Granularity())
		require.NoError(t, err)
		small, err := s.Take(s.GroupSMs())
		require.NoError(t, err)
		rest, err := s.TakeRest()
		require.NoError(t, err)
		require.Equal(t, dev.Granularity(), small.SMs())
		require.Equal(t, (s.Groups()-1)*s.GroupSMs()+s.Remainder(), rest.SMs(), "the rest includes the split's remainder")
		require.Zero(t, s.FreeSMs())
		run(t, small, 4096, 64)
		run(t, rest, 4096, 64)
		require.NoError(t, small.Close())
		require.NoError(t, small.Close(), "Close must be idempotent")
		require.Equal(t, s.GroupSMs(), s.FreeSMs(), "closing a partition returns its groups")
		require.NoError(t, rest.Close())
		require.ErrorIs(t, rest.Do(func(cuda.Context) error { return nil }), smpart.ErrClosed)
	})

	t.Run("layouts reshape between sizes, in order", func(t *testing.T) {
		s, err := dev.Split(dev.Granularity())
		require.NoError(t, err)
		g := s.GroupSMs()
		if s.Groups() < 4 {
			t.Skipf("%d groups: too few for layouts of 1, 2 and 4", s.Groups())
		}
		small, err := s.TakeLayouts(g, []int{2 * g, 4 * g}, 0)
		require.NoError(t, err)
		defer small.Close()
		require.Equal(t, []int{g, 2 * g, 4 * g}, small.Sizes())
		require.Equal(t, g, small.SMs())
		extra, err := small.NewStream()
		require.NoError(t, err)
		rest, err := s.TakeRestLayouts([]int{(s.Groups()-4)*g + s.Remainder()})
		require.NoError(t, err)
		defer rest.Close()
		require.Equal(t, (s.Groups()-1)*g+s.Remainder(), rest.SMs())
		require.Zero(t, s.FreeSMs())

		// Growing into groups another partition holds changes nothing.
		before := small.Stream()
		require.ErrorIs(t, small.Reshape(4*g, nil), smpart.ErrInsufficientSMs)
		require.Equal(t, g, small.SMs())
		require.Equal(t, before, small.Stream())
		require.ErrorIs(t, small.Reshape(3*g, nil), smpart.ErrGranularity)
		require.ErrorIs(t, rest.Reshape(rest.SMs()-g, nil), smpart.ErrGranularity)

		// The rest shrinks, giving up the groups the small one grows into.
		require.NoError(t, rest.Reshape((s.Groups()-4)*g+s.Remainder(), nil))
		require.Equal(t, 3*g, s.FreeSMs())
		swapped := map[cuda.Stream]cuda.Stream{}
		require.NoError(t, small.Reshape(4*g, func(o, n cuda.Stream) { swapped[o] = n }))
		require.Equal(t, 4*g, small.SMs())
		require.Zero(t, s.FreeSMs())
		require.Len(t, swapped, 2, "the first stream and the extra one")
		require.Equal(t, small.Stream(), swapped[before])
		require.NotEqual(t, before, small.Stream(), "a new layout's own stream")
		out := run(t, small, 4096, 64)
		require.NoError(t, small.DestroyStream(swapped[extra]))
		// Back: the groups return to the split.
		require.NoError(t, small.Reshape(g, nil))
		require.Equal(t, before, small.Stream(), "the first layout's stream again")
		require.Equal(t, 3*g, s.FreeSMs())
		require.Equal(t, out, run(t, small, 4096, 64))
		require.NoError(t, small.Close())
		require.NoError(t, rest.Close())
		require.Equal(t, s.Groups()*g+s.Remainder(), s.FreeSMs())
	})

	t.Run("a stream of its own is destroyed alone", func(t *testing.T) {
		s, err := dev.Split(dev.Granularity())
		require.NoError(t, err)
		p, err := s.Take(s.GroupSMs())
		require.NoError(t, err)
		defer p.Close()
		st, err := p.NewStream()
		require.NoError(t, err)
		require.NoError(t, p.DestroyStream(st))
		require.Error(t, p.DestroyStream(st), "destroyed twice")
		require.Error(t, p.DestroyStream(p.Stream()), "the first stream lives with the partition")
		run(t, p, 4096, 64) // the partition still works
		require.NoError(t, p.Close())
		require.ErrorIs(t, p.DestroyStream(st), smpart.ErrClosed)
	})

	t.Run("context calls from migrating goroutines", func(t *testing.T) {
		// Regression for CUDA_ERROR_INVALID_CONTEXT (201): goroutines move
		// between OS threads, so no call may rely on a thread's current context.
		s, err := dev.Split(dev.Granularity())
		require.NoError(t, err)
		p, err := s.Take(s.GroupSMs())
		require.NoError(t, err)
		defer p.Close()
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for g := 0; g < 16; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; i < 20; i++ {
					runtime.Gosched()
					var err error
					if g%2 == 0 {
						err = p.Do(func(ctx cuda.Context) error {
							ptr, err := drv.MemAlloc(ctx, 1<<20)
							if err != nil {
								return err
							}
							return drv.MemFree(ctx, ptr)
						})
					} else {
						var ptr cuda.DevicePtr
						if ptr, err = drv.MemAlloc(dev.Primary(), 1<<20); err == nil {
							err = drv.MemFree(dev.Primary(), ptr)
						}
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}(g)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	})

	t.Run("typed errors carry the CUDA result", func(t *testing.T) {
		_, err := drv.MemAlloc(dev.Primary(), 0)
		var ce *cuda.Error
		require.True(t, errors.As(err, &ce), "got %v", err)
		require.ErrorIs(t, err, cuda.ErrorInvalidValue)
		_, err = drv.MemAlloc(dev.Primary(), 1<<60)
		require.ErrorIs(t, err, cuda.ErrorOutOfMemory)
		_, err = drv.ModuleLoadData(dev.Primary(), []byte("not ptx"))
		require.Error(t, err)
	})
	_ = binary.LittleEndian
}
