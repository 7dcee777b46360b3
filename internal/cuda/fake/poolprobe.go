package fake

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// PoolProbe is one row of testdata/h200-pool-probe.tsv: a pool of maximum
// size MaxSize, filled with Block-byte allocations until out of memory (at
// most ProbeLimit), gave Blocks of them and then held Reserved bytes.
type PoolProbe struct {
	MaxSize, Block uint64
	Blocks         int
	Reserved       uint64
}

// ProbeLimit is the most blocks one probe allocates.
const ProbeLimit = 20000

// ReadPoolProbes reads a pool probe table.
func ReadPoolProbes(path string) ([]PoolProbe, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rows []PoolProbe
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "maxSize") {
			continue
		}
		var r PoolProbe
		if _, err := fmt.Sscanf(line, "%d\t%d\t%d\t%d", &r.MaxSize, &r.Block, &r.Blocks, &r.Reserved); err != nil {
			return nil, fmt.Errorf("%s: %q: %w", path, line, err)
		}
		rows = append(rows, r)
	}
	return rows, sc.Err()
}

// ProbePool runs one probe on any driver (the fake, or the GPU's in
// fcsp.TestGPUPoolProbe) with the device's primary context current and
// frees everything after.
func ProbePool(drv cuda.Driver, ctx cuda.Context, dev cuda.Device, maxSize, block uint64) (got PoolProbe, err error) {
	got = PoolProbe{MaxSize: maxSize, Block: block}
	s, err := drv.StreamCreate(ctx, cuda.StreamNonBlocking)
	if err != nil {
		return got, err
	}
	defer func() { err = errors.Join(err, drv.StreamDestroy(ctx, s)) }()
	h, err := drv.MemPoolCreate(ctx, dev, maxSize)
	if err != nil {
		return got, err
	}
	var ptrs []cuda.DevicePtr
	for len(ptrs) < ProbeLimit {
		p, err := drv.MemAllocFromPoolAsync(ctx, block, h, s)
		if errors.Is(err, cuda.ErrorOutOfMemory) {
			break
		}
		if err != nil {
			return got, errors.Join(err, drv.MemPoolDestroy(ctx, h))
		}
		ptrs = append(ptrs, p)
	}
	got.Blocks = len(ptrs)
	got.Reserved, err = drv.MemPoolGetAttribute(ctx, h, cuda.PoolReservedMemCurrent)
	// Last first: the fake keeps blocks in an offset-sorted slice, and
	// freeing from its end costs no copying (seconds under -race).
	for i := len(ptrs) - 1; i >= 0; i-- {
		err = errors.Join(err, drv.MemFreeAsync(ctx, ptrs[i], s))
	}
	return got, errors.Join(err, drv.StreamSynchronize(ctx, s), drv.MemPoolDestroy(ctx, h))
}
