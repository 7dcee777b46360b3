package devmem

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/lockorder"
	"github.com/fcsp-go/fcsp-go/memtrack"
)

// The memory calls that allocate nothing: fills, copies and the tenant's
// view of cuMemGetInfo. Each counts itself in the tenant's life lock and
// runs with the primary context, which serves green streams too
// (docs/CONTEXTS.md); they are the same for both engines.
//
// A fill or copy is checked against the allocation records before the
// driver sees it (InBlock): one that starts inside a block the SDK
// allocated must end inside it. On a GPU the driver checks a range only
// against what it mapped, and a pool maps a chunk (32 MiB) at a time and
// hands out blocks inside it, so a copy past a block's end may reach the
// next block. A pointer no SDK allocation holds (a library's workspace,
// memory from another allocator) is not checked: the driver judges it,
// as before.

// MemsetD16 sets n 16-bit words at p to v, in order on s (cuMemsetD16Async:
// a plain cuMemsetD16 runs on the legacy NULL stream, which non-blocking
// streams do not wait for).
func (c *Config) MemsetD16(s Stream, p cuda.DevicePtr, v uint16, n uint64) error {
	return c.memset("MemsetD16", p, n, 2, func(ctx cuda.Context) error { return c.Driver.MemsetD16Async(ctx, p, v, n, s.Handle()) })
}

// MemsetD32 sets n 32-bit words at p to v, in order on s.
func (c *Config) MemsetD32(s Stream, p cuda.DevicePtr, v uint32, n uint64) error {
	return c.memset("MemsetD32", p, n, 4, func(ctx cuda.Context) error { return c.Driver.MemsetD32Async(ctx, p, v, n, s.Handle()) })
}

func (c *Config) memset(op string, p cuda.DevicePtr, n, width uint64, f func(cuda.Context) error) error {
	if n == 0 {
		return fmt.Errorf("%w: memset of 0 words", errs.ErrInvalidArgument)
	}
	if n > math.MaxUint64/width {
		return fmt.Errorf("%w: %s of %d words of %d bytes overflows 64 bits; at most %d words", errs.ErrInvalidArgument, op, n, width, uint64(math.MaxUint64)/width)
	}
	if err := c.InBlock(op, p, n*width); err != nil {
		return err
	}
	return c.do(f)
}

// CopyToDevice copies src into device memory at dst.
func (c *Config) CopyToDevice(dst cuda.DevicePtr, src []byte) error {
	if err := c.InBlock("CopyToDevice", dst, uint64(len(src))); err != nil {
		return err
	}
	return c.do(func(ctx cuda.Context) error { return c.Driver.MemcpyHtoD(ctx, dst, src) })
}

// CopyFromDevice copies device memory at src into dst.
func (c *Config) CopyFromDevice(dst []byte, src cuda.DevicePtr) error {
	if err := c.InBlock("CopyFromDevice", src, uint64(len(dst))); err != nil {
		return err
	}
	return c.do(func(ctx cuda.Context) error { return c.Driver.MemcpyDtoH(ctx, dst, src) })
}

// InBlock checks that n bytes from p, where p lies in a live allocation of
// the device's tracker (any tenant's), end inside that allocation; past
// its end it fails with errs.ErrOutOfRange, naming the block's size, the
// offset and the length. A pointer no allocation holds passes: it is not
// the SDK's to judge. It allocates nothing and takes no lock.
func (c *Config) InBlock(op string, p cuda.DevicePtr, n uint64) error {
	b, ok := c.Tracker.Block(uint64(p))
	if !ok {
		return nil
	}
	if off := uint64(p) - b.Ptr; n > b.Size-off {
		return outOfRange(op, b, off, n)
	}
	return nil
}

// outOfRange is InBlock's error, apart so that InBlock stays small.
func outOfRange(op string, b memtrack.Allocation, off, n uint64) error {
	return fmt.Errorf("%w: %s of %d bytes at offset %d of the %d-byte block at %#x runs %d bytes past its end; at most %d bytes fit from there",
		errs.ErrOutOfRange, op, n, off, b.Size, b.Ptr, n-(b.Size-off), b.Size-off)
}

// MemInfo is what cuMemGetInfo should tell code running as the tenant:
// total is its quota (at most the device's limit), free what remains of it
// less cached, the bytes kept on its streams' free lists, which are the
// tenant's too, and never more than the device limit leaves (Tracker.Room:
// what the tenants' pools map counts there) nor than the device has free.
// (Free space mapped by its pool is not added: whether a request fits in
// it depends on the blocks around it.) The device's figure is read through
// c.Info, which any change the engines make to what they hold renews. The
// call counts itself in the life lock, as the fills and copies do, whose
// entry says a closed tenant or a lost device, which the cached figure
// must not hide; a reading is made with the primary context. (cached is
// the tenant's: Streams would make a list at every call, which a server
// asking at request rate would pay for.)
func (c *Config) MemInfo(cached func() uint64) (free, total uint64, err error) {
	tok, err := c.Enter()
	if err != nil {
		return 0, 0, err
	}
	defer c.Exit(tok)
	df, dt, err := c.Info.Get(c.Driver, c.Device.Primary())
	if err != nil {
		return 0, 0, err
	}
	free, total = c.Account.MemInfo(df, min(dt, c.Tracker.Limit()))
	free -= min(free, cached())
	room := c.Tracker.Room(free)
	if c.chunked && room < free {
		// Where the device limit binds, a pool grows by whole chunks: the
		// part of one that the limit leaves cannot be allocated.
		room -= room % cuda.PoolChunk
	}
	return room, total, nil
}

// InfoMaxAge is how old the device's free-memory figure that MemInfo
// reports may be, where the SDK changed nothing it holds meanwhile.
// cuMemGetInfo asks the kernel driver (about 100 µs of a host core on the
// H200 host: 16 goroutines a class asking every 100 µs kept 13 cores
// busy); a server that sizes work from the figure at request rate needs it
// cheap far more than it needs other processes' changes to the
// microsecond. The tenant's own part of it (its quota and what it holds)
// is exact at every call, and so is the SDK's: an engine that changes what
// it holds from the driver (a plain allocation or free, a chunk its pool
// mapped or gave back) renews the figure (Changed).
const InfoMaxAge = time.Millisecond

// InfoCache caches a device's free and total memory: one caller refreshes
// it when it is older than InfoMaxAge, or the engines changed what they
// hold since it was read; the others read the last figure meanwhile. Its
// zero value is empty; one per device, and nil does without one.
type InfoCache struct {
	last atomic.Pointer[infoReading]     // atomic: written by the refresh under mu
	gen  atomic.Uint64                   // atomic: counts the engines' changes (Changed)
	mu   lockorder.Mutex[lockorder.Info] // one refresh at a time
}

// infoReading is one cuMemGetInfo: at (monotonic ns), after gen changes.
type infoReading struct {
	at          int64
	gen         uint64
	free, total uint64
}

// Changed says the engines changed what they hold from the device: the
// next Get reads it again.
func (m *InfoCache) Changed() {
	if m != nil {
		m.gen.Add(1)
	}
}

// Get is the device's free and total memory: at most InfoMaxAge old, and
// read after the engines' last change; a reading is made with ctx.
func (m *InfoCache) Get(drv cuda.Driver, ctx cuda.Context) (free, total uint64, err error) {
	if m == nil {
		return drv.MemGetInfo(ctx)
	}
	if r := m.last.Load(); r != nil && r.gen == m.gen.Load() && nanotime()-r.at < int64(InfoMaxAge) {
		return r.free, r.total, nil
	}
	if !m.mu.TryLock() {
		// Another caller is refreshing: the last figure will do if the
		// engines changed nothing since it was read.
		if r := m.last.Load(); r != nil && r.gen == m.gen.Load() {
			return r.free, r.total, nil
		}
		m.mu.Lock()
	}
	defer m.mu.Unlock()
	if r := m.last.Load(); r != nil && r.gen == m.gen.Load() && nanotime()-r.at < int64(InfoMaxAge) {
		return r.free, r.total, nil
	}
	gen := m.gen.Load() // before the reading: a change during it renews it again
	if free, total, err = drv.MemGetInfo(ctx); err != nil {
		return 0, 0, err
	}
	m.last.Store(&infoReading{at: nanotime(), gen: gen, free: free, total: total})
	return free, total, nil
}

// nanotime is a monotonic clock reading in ns.
func nanotime() int64 { return int64(time.Since(clockBase)) }

var clockBase = time.Now()
