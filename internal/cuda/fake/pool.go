package fake

import (
	"sort"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// pool is a stream-ordered memory pool: blocks handed out (live) and blocks
// freed but kept from the driver (cached), bounded by maxSize. As on the GPU,
// a synchronisation releases cached bytes above the release threshold.
type pool struct {
	ctx       cuda.Context
	maxSize   uint64
	threshold uint64
	live      map[cuda.DevicePtr]uint64
	cached    map[cuda.DevicePtr]uint64
}

func (p *pool) bytes(m map[cuda.DevicePtr]uint64) uint64 {
	var n uint64
	for _, s := range m {
		n += s
	}
	return n
}

func (p *pool) reserved() uint64 { return p.bytes(p.live) + p.bytes(p.cached) }

// trim gives cached blocks back to the device, largest first, until the pool
// holds at most keep bytes.
func (p *pool) trim(mem *Memory, keep uint64) {
	ptrs := make([]cuda.DevicePtr, 0, len(p.cached))
	for ptr := range p.cached {
		ptrs = append(ptrs, ptr)
	}
	sort.Slice(ptrs, func(i, j int) bool { return p.cached[ptrs[i]] > p.cached[ptrs[j]] })
	for _, ptr := range ptrs {
		if p.reserved() <= keep {
			return
		}
		mem.free(ptr)
		delete(p.cached, ptr)
	}
}

func (d *Driver) pool(op string, h cuda.MemPool) (*pool, error) {
	p := d.pools[h]
	if p == nil {
		return nil, cuda.Check(op, cuda.ErrorInvalidValue)
	}
	return p, nil
}

func (d *Driver) MemPoolCreate(c cuda.Context, dev cuda.Device, maxSize uint64) (cuda.MemPool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	const op = "cuMemPoolCreate"
	if _, err := d.ctx(op, c); err != nil {
		return 0, err
	}
	if err := d.device(op, dev); err != nil {
		return 0, err
	}
	h := cuda.MemPool(d.handle())
	d.pools[h] = &pool{ctx: c, maxSize: maxSize, live: map[cuda.DevicePtr]uint64{}, cached: map[cuda.DevicePtr]uint64{}}
	return h, nil
}

func (d *Driver) MemPoolDestroy(c cuda.Context, h cuda.MemPool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	const op = "cuMemPoolDestroy"
	if _, err := d.ctx(op, c); err != nil {
		return err
	}
	p, err := d.pool(op, h)
	if err != nil {
		return err
	}
	// Memory still allocated from a destroyed pool stays valid until freed
	// on the GPU; the fake frees everything, which tests then see as leaks
	// only if they forgot to free first.
	p.trim(&d.mem, 0)
	for ptr := range p.live {
		d.mem.free(ptr)
	}
	delete(d.pools, h)
	return nil
}

func (d *Driver) MemAllocFromPoolAsync(c cuda.Context, n uint64, h cuda.MemPool, s cuda.Stream) (cuda.DevicePtr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	const op = "cuMemAllocFromPoolAsync"
	if err := d.streamScope(op, c, s); err != nil {
		return 0, err
	}
	p, err := d.pool(op, h)
	if err != nil {
		return 0, err
	}
	if _, err := d.stream(op, s); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, cuda.Check(op, cuda.ErrorInvalidValue)
	}
	if g := d.spec.PoolGranularity; g > 0 {
		n = (n + g - 1) / g * g // pools map memory in granules: small blocks hold more than they ask
	}
	// Reuse the smallest cached block that fits.
	var best cuda.DevicePtr
	for ptr, size := range p.cached {
		if size >= n && (best == 0 || size < p.cached[best]) {
			best = ptr
		}
	}
	if best != 0 {
		p.live[best] = p.cached[best]
		delete(p.cached, best)
		return best, nil
	}
	if p.maxSize > 0 && p.reserved()+n > p.maxSize {
		p.trim(&d.mem, p.maxSize-n) // the driver gives cached memory back before failing
		if p.reserved()+n > p.maxSize {
			return 0, cuda.Check(op, cuda.ErrorOutOfMemory)
		}
	}
	ptr, ok := d.mem.alloc(n)
	if !ok {
		return 0, cuda.Check(op, cuda.ErrorOutOfMemory)
	}
	p.live[ptr] = n
	return ptr, nil
}

func (d *Driver) MemFreeAsync(c cuda.Context, ptr cuda.DevicePtr, s cuda.Stream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	const op = "cuMemFreeAsync"
	if err := d.streamScope(op, c, s); err != nil {
		return err
	}
	if _, err := d.stream(op, s); err != nil {
		return err
	}
	for _, p := range d.pools {
		if n, ok := p.live[ptr]; ok {
			delete(p.live, ptr)
			p.cached[ptr] = n
			return nil
		}
	}
	if !d.mem.free(ptr) {
		return cuda.Check(op, cuda.ErrorInvalidValue)
	}
	return nil
}

func (d *Driver) MemPoolTrimTo(c cuda.Context, h cuda.MemPool, keep uint64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	const op = "cuMemPoolTrimTo"
	if _, err := d.ctx(op, c); err != nil {
		return err
	}
	p, err := d.pool(op, h)
	if err != nil {
		return err
	}
	p.trim(&d.mem, keep)
	return nil
}

func (d *Driver) MemPoolSetAttribute(c cuda.Context, h cuda.MemPool, a cuda.PoolAttribute, v uint64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	const op = "cuMemPoolSetAttribute"
	if _, err := d.ctx(op, c); err != nil {
		return err
	}
	p, err := d.pool(op, h)
	if err != nil {
		return err
	}
	if a != cuda.PoolReleaseThreshold {
		return cuda.Check(op, cuda.ErrorInvalidValue)
	}
	p.threshold = v
	return nil
}

func (d *Driver) MemPoolGetAttribute(c cuda.Context, h cuda.MemPool, a cuda.PoolAttribute) (uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	const op = "cuMemPoolGetAttribute"
	if _, err := d.ctx(op, c); err != nil {
		return 0, err
	}
	p, err := d.pool(op, h)
	if err != nil {
		return 0, err
	}
	switch a {
	case cuda.PoolReleaseThreshold:
		return p.threshold, nil
	case cuda.PoolReservedMemCurrent:
		return p.reserved(), nil
	case cuda.PoolUsedMemCurrent:
		return p.bytes(p.live), nil
	}
	return 0, cuda.Check(op, cuda.ErrorInvalidValue)
}

// releaseAboveThreshold is what a synchronisation does to every pool.
func (d *Driver) releaseAboveThreshold() {
	for _, p := range d.pools {
		p.trim(&d.mem, max(p.threshold, p.bytes(p.live)))
	}
}

// streamScope validates the context of a call that may be unscoped (zero
// context, the stream naming it). The caller holds d.mu.
func (d *Driver) streamScope(op string, c cuda.Context, s cuda.Stream) error {
	if c != 0 || s == 0 {
		_, err := d.ctx(op, c)
		return err
	}
	if err := d.enter(op); err != nil {
		return err
	}
	if d.scopedOnly {
		return cuda.Check(op, cuda.ErrorInvalidContext)
	}
	return nil
}
