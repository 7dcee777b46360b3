package fake

import (
	"cmp"
	"slices"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// pool is a stream-ordered memory pool, as the H200 showed one to be
// (fcsp.TestGPUPoolProbe): a contiguous address range of its maximum size
// rounded up to whole chunks (32 MiB there; a 2 MiB maximum still holds 32
// MiB), blocks suballocated in it first-fit at 512-byte alignment (a 3 MiB
// block may straddle two chunks: 21 fit in 64 MiB), and device memory
// mapped a chunk at a time as blocks reach it. A freed block is free space
// at once; its chunks stay mapped (cached) until a trim, or a
// synchronisation with more mapped than the release threshold. A trim
// gives back only chunks whose freed blocks' frees were seen by the host:
// on the H200 a block freed with cuMemFreeAsync on a stream with nothing
// queued kept its chunk through two trims, a successful cuStreamQuery and
// a completed event, and gave it back after cuStreamSynchronize. (The
// fake's synchronisations, and its stream queries, see every free: the
// driver's calls that end them do not say which stream.)
type pool struct {
	ctx       cuda.Context
	chunk     uint64
	base      cuda.DevicePtr // the range's first address
	size      uint64         // the range: the maximum size in whole chunks
	threshold uint64
	live      map[uint64]uint64 // block offset -> size
	order     []block           // live blocks by offset
	mapped    map[uint64]bool   // chunk index -> mapped
	// unseen are blocks freed whose frees no synchronisation has seen
	// yet: a trim keeps their chunks.
	unseen []block
	// dense is how many of order's first blocks are packed from offset 0
	// with no free byte between them: fit starts after them, so filling a
	// pool is linear, not quadratic (20000-block probes under -race).
	dense int
}

const poolAlign = 512

type block struct{ off, n uint64 }

func (p *pool) used() uint64 {
	var n uint64
	for _, size := range p.live {
		n += size
	}
	return n
}

func (p *pool) reserved() uint64 { return uint64(len(p.mapped)) * p.chunk }

// fit finds the lowest offset where n bytes fit between live blocks.
func (p *pool) fit(n uint64) (uint64, bool) {
	at := uint64(0)
	if p.dense > 0 {
		at = p.end(p.dense - 1)
	}
	for _, b := range p.order[p.dense:] {
		if b.off >= at+n {
			break
		}
		at = (b.off + b.n + poolAlign - 1) &^ (poolAlign - 1)
	}
	return at, at+n <= p.size
}

func (p *pool) find(off uint64) (int, bool) {
	return slices.BinarySearchFunc(p.order, off, func(b block, off uint64) int { return cmp.Compare(b.off, off) })
}

// end is where a block after order[i] may start.
func (p *pool) end(i int) uint64 {
	b := p.order[i]
	return (b.off + b.n + poolAlign - 1) &^ (poolAlign - 1)
}

func (p *pool) add(off, n uint64) {
	p.live[off] = n
	i, _ := p.find(off)
	p.order = slices.Insert(p.order, i, block{off, n})
	for p.dense < len(p.order) {
		want := uint64(0)
		if p.dense > 0 {
			want = p.end(p.dense - 1)
		}
		if p.order[p.dense].off != want {
			break
		}
		p.dense++
	}
}

// removeOrder takes the block at off out of order, making its space free
// (its free was reached: MemFreeAsync has taken it out of live).
func (p *pool) removeOrder(off uint64) {
	i, ok := p.find(off)
	if !ok {
		return
	}
	p.order = slices.Delete(p.order, i, i+1)
	p.dense = min(p.dense, i)
}

// chunks is the range of chunk indices [lo, hi) that bytes [off, off+n) touch.
func (p *pool) chunks(off, n uint64) (lo, hi uint64) {
	return off / p.chunk, (off + n + p.chunk - 1) / p.chunk
}

// trim unmaps chunks no live block touches, highest first, until at most
// keep bytes are mapped.
func (p *pool) trim(mem *Memory, keep uint64) {
	busy := map[uint64]bool{}
	for _, b := range p.order { // live blocks, and those whose frees are queued
		lo, hi := p.chunks(b.off, b.n)
		for c := lo; c < hi; c++ {
			busy[c] = true
		}
	}
	for _, b := range p.unseen {
		lo, hi := p.chunks(b.off, b.n)
		for c := lo; c < hi; c++ {
			busy[c] = true
		}
	}
	idx := make([]uint64, 0, len(p.mapped))
	for c := range p.mapped {
		if !busy[c] {
			idx = append(idx, c)
		}
	}
	slices.Sort(idx)
	for i := len(idx) - 1; i >= 0 && p.reserved() > keep; i-- {
		delete(p.mapped, idx[i])
		mem.used -= p.chunk
	}
}

// destroy unmaps everything and forgets the blocks.
func (p *pool) destroy(mem *Memory) {
	for off := range p.live {
		mem.unplace(p.base + cuda.DevicePtr(off))
	}
	p.live, p.order, p.dense, p.unseen = nil, nil, 0, nil
	mem.used -= p.reserved()
	p.mapped = nil
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
	chunk := d.spec.PoolChunk
	if chunk == 0 {
		chunk = cuda.PoolChunk
	}
	size := maxSize
	if size == 0 {
		size = d.mem.total // no maximum: the whole device
	}
	size = (size + chunk - 1) / chunk * chunk
	h := cuda.MemPool(d.handle())
	d.pools[h] = &pool{ctx: c, chunk: chunk, base: d.mem.reserve(size), size: size,
		live: map[uint64]uint64{}, mapped: map[uint64]bool{}}
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
	p.destroy(&d.mem)
	delete(d.pools, h)
	return nil
}

func (d *Driver) MemAllocFromPoolAsync(c cuda.Context, n uint64, h cuda.MemPool, s cuda.Stream) (cuda.DevicePtr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	const op = "cuMemAllocFromPoolAsync"
	if err := d.enterStreamCall(op, c, s); err != nil {
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
	off, ok := p.fit(n)
	if !ok { // no gap that large below the maximum size
		return 0, cuda.Check(op, cuda.ErrorOutOfMemory)
	}
	lo, hi := p.chunks(off, n)
	var mapped []uint64
	for c := lo; c < hi; c++ {
		if p.mapped[c] {
			continue
		}
		if d.mem.total-d.mem.used < p.chunk {
			for _, m := range mapped { // undo this call's mappings
				delete(p.mapped, m)
				d.mem.used -= p.chunk
			}
			return 0, cuda.Check(op, cuda.ErrorOutOfMemory)
		}
		p.mapped[c] = true
		d.mem.used += p.chunk
		mapped = append(mapped, c)
	}
	p.add(off, n)
	ptr := p.base + cuda.DevicePtr(off)
	d.mem.place(ptr, n)
	return ptr, nil
}

// MemFreeAsync frees ptr in order on s: at once where s is idle, else once
// the work queued before it is done (queue.go), so that a kernel queued
// behind a held one still finds its memory. A pool's block is no longer
// live from the call on (a second free is refused), and its space is
// taken by nothing else until the free is reached.
func (d *Driver) MemFreeAsync(c cuda.Context, ptr cuda.DevicePtr, s cuda.Stream) error {
	d.mu.Lock()
	const op = "cuMemFreeAsync"
	if err := d.enterStreamCall(op, c, s); err != nil {
		d.mu.Unlock()
		return err
	}
	st, err := d.stream(op, s)
	if err != nil {
		d.mu.Unlock()
		return err
	}
	var free func()
	for _, p := range d.pools {
		if ptr < p.base || uint64(ptr-p.base) >= p.size {
			continue
		}
		off := uint64(ptr - p.base)
		n, ok := p.live[off]
		if !ok {
			break
		}
		delete(p.live, off)
		free = func() {
			p.removeOrder(off)
			p.unseen = append(p.unseen, block{off, n})
			d.mem.unplace(ptr)
		}
		break
	}
	if free == nil {
		if !d.mem.plain(ptr) {
			d.mu.Unlock()
			return cuda.Check(op, cuda.ErrorInvalidValue)
		}
		free = func() { d.mem.free(ptr) }
	}
	if idle(st) {
		free()
		d.mu.Unlock()
		return nil
	}
	return d.submit(st, &work{locked: free}) // unlocks d.mu
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
		return p.used(), nil
	}
	return 0, cuda.Check(op, cuda.ErrorInvalidValue)
}

// releaseAboveThreshold is what a synchronisation does to every pool: the
// frees it sees, and what is mapped above the release threshold.
func (d *Driver) releaseAboveThreshold() {
	for _, p := range d.pools {
		p.unseen = p.unseen[:0]
		p.trim(&d.mem, p.threshold)
	}
}
