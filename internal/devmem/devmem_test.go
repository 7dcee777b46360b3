package devmem

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/unscoped"
	"github.com/fcsp-go/fcsp-go/memtrack"
)

// device is one fake device with what its engines share.
type device struct {
	t       testing.TB
	drv     *fake.Driver
	ord     cuda.Device
	primary cuda.Context
	tracker *memtrack.Tracker
	peers   Peers
	probe   unscoped.Probe
	log     bytes.Buffer
}

func (d *device) Ordinal() cuda.Device  { return d.ord }
func (d *device) Primary() cuda.Context { return d.primary }

func newDevice(t testing.TB, totalMem, limit uint64) *device {
	spec := fake.H200()
	if totalMem > 0 {
		spec.TotalMem = totalMem
	}
	d := &device{t: t, drv: fake.New(spec)}
	var err error
	d.ord, err = d.drv.DeviceGet(0)
	require.NoError(t, err)
	d.primary, err = d.drv.PrimaryCtxRetain(d.ord)
	require.NoError(t, err)
	if limit == 0 {
		limit = spec.TotalMem
	}
	d.tracker, err = memtrack.New(limit, memtrack.WithLeaseChunk(0))
	require.NoError(t, err)
	return d
}

// tenant is what fcsp's tenant gives its engine: a life lock (here a
// closed flag and a count of calls in it) and its streams.
type tenant struct {
	d       *device
	name    string
	acct    *memtrack.Account
	mem     Allocator
	closed  atomic.Bool
	in      atomic.Int64
	mu      sync.Mutex
	streams []*stream
	// listed and released count Streams' lists and their return: the
	// engine must give back every list it took (ReleaseStreams).
	listed, released atomic.Int64
	// paused is a Reshape's gate held: an Enter then would wait for the
	// calls in flight, its caller's own entry among them (nested counts
	// the entries refused so). onRelease runs at each ReleaseStreams.
	paused    atomic.Bool
	nested    atomic.Int64
	onRelease func()
}

type stream struct {
	d      *device
	h      cuda.Stream
	blocks Blocks
	syncs  atomic.Int64
	onSync func() // runs at each Synchronize
	// capturing: a capture is under way; busy: its work runs (Idle).
	capturing, busy atomic.Bool
}

func (s *stream) Handle() cuda.Stream { return s.h }
func (s *stream) Capturing() bool     { return s.capturing.Load() }
func (s *stream) Idle() bool          { return !s.capturing.Load() && !s.busy.Load() }
func (s *stream) Blocks() *Blocks     { return &s.blocks }
func (s *stream) Synchronize() error {
	s.syncs.Add(1)
	if s.onSync != nil {
		s.onSync()
	}
	return s.d.drv.StreamSynchronize(s.d.primary, s.h)
}

// newTenant makes a tenant with a quota and one stream; pool nil: plain.
func (d *device) newTenant(name string, quota uint64, pool *PoolConfig, green bool) *tenant {
	t := d.t
	tn := &tenant{d: d, name: name}
	var err error
	tn.acct, err = d.tracker.NewAccount(name, quota)
	require.NoError(t, err)
	tn.newStream()
	cfg := Config{
		Driver: d.drv, Device: d, Account: tn.acct, Tracker: d.tracker, Peers: &d.peers,
		Owner: tn,
	}
	if green {
		cfg.Probe = &d.probe
	}
	if pool == nil {
		tn.mem = NewPlain(cfg)
	} else {
		tn.mem, err = NewPooled(cfg, *pool)
		require.NoError(t, err)
	}
	return tn
}

func (tn *tenant) Enter() (uint32, error) {
	if tn.closed.Load() {
		return 0, errs.ErrClosed
	}
	if tn.paused.Load() {
		tn.nested.Add(1)
		return 0, errors.New("entered while a reshape waits for the calls in flight: it would wait for its own caller")
	}
	tn.in.Add(1)
	return 7, nil
}

func (tn *tenant) TryEnter() (uint32, bool) {
	if tn.closed.Load() || tn.paused.Load() {
		return 0, false
	}
	tn.in.Add(1)
	return 7, true
}

func (tn *tenant) Exit(tok uint32) {
	require.Equal(tn.d.t, uint32(7), tok, "Exit gets Enter's token")
	tn.in.Add(-1)
}

func (tn *tenant) Log(msg string) { tn.d.log.WriteString(msg + "\n") }

func (tn *tenant) Streams() []Stream {
	tn.listed.Add(1)
	tn.mu.Lock()
	defer tn.mu.Unlock()
	var l []Stream
	for _, s := range tn.streams {
		l = append(l, s)
	}
	return l
}

// ReleaseStreams counts the lists given back: every Streams must be.
func (tn *tenant) ReleaseStreams([]Stream) {
	tn.released.Add(1)
	if tn.onRelease != nil {
		tn.onRelease()
	}
}

func (tn *tenant) newStream() *stream {
	h, err := tn.d.drv.StreamCreate(tn.d.primary, cuda.StreamNonBlocking)
	require.NoError(tn.d.t, err)
	s := &stream{d: tn.d, h: h}
	tn.mu.Lock()
	defer tn.mu.Unlock()
	tn.streams = append(tn.streams, s)
	return s
}

func (tn *tenant) first() *stream { return tn.streams[0] }

// close closes the tenant as fcsp does: no call may enter, then the engine
// frees what was leaked and cached, then the streams go.
func (tn *tenant) close() error {
	tn.closed.Store(true)
	require.Zero(tn.d.t, tn.in.Load(), "a call still counted in the life lock")
	err := tn.mem.Close(tn.d.primary, tn.acct.Live())
	for _, s := range tn.streams {
		err = errors.Join(err, tn.d.drv.StreamDestroy(tn.d.primary, s.h))
	}
	_, aerr := tn.acct.Close()
	return errors.Join(err, aerr)
}

func pooledWith(quota uint64) *PoolConfig { return &PoolConfig{Quota: quota, Explicit: true} }

func TestPlainAllocFree(t *testing.T) {
	d := newDevice(t, 0, 0)
	tn := d.newTenant("a", 4<<20, nil, false)
	s := tn.first()
	p, err := tn.mem.Alloc(s, 1<<20)
	require.NoError(t, err)
	require.Equal(t, uint64(1<<20), tn.acct.Used())
	require.Equal(t, 1, d.drv.Calls("cuMemAlloc_v2"))
	require.NoError(t, tn.mem.Free(s, p))
	require.Zero(t, tn.acct.Used())
	require.Zero(t, s.blocks.Bytes(), "plain engines keep nothing")
	require.ErrorIs(t, tn.mem.Free(s, p), memtrack.ErrUnknownPointer, "freed twice")
	require.Equal(t, 1, d.drv.Calls("cuMemFree_v2"), "a refused free reaches no driver")

	_, err = tn.mem.Alloc(s, 5<<20)
	require.ErrorIs(t, err, memtrack.ErrQuotaExceeded)
	require.Zero(t, tn.acct.Used())

	// The driver failing gives the quota back; a free it refuses keeps the
	// record, so it can be freed again.
	d.drv.FailNext("cuMemAlloc_v2", cuda.ErrorOutOfMemory)
	_, err = tn.mem.Alloc(s, 1<<20)
	require.ErrorIs(t, err, cuda.ErrorOutOfMemory)
	require.NotContains(t, err.Error(), `tenant "a"`, "an engine's errors are bare: the face names the tenant")
	require.Zero(t, tn.acct.Used())
	p, err = tn.mem.Alloc(s, 1<<20)
	require.NoError(t, err)
	d.drv.FailNext("cuMemFree_v2", cuda.ErrorInvalidValue)
	require.ErrorIs(t, tn.mem.Free(s, p), cuda.ErrorInvalidValue)
	require.Equal(t, uint64(1<<20), tn.acct.Used())
	require.NoError(t, tn.mem.Free(s, p))

	require.NoError(t, tn.mem.Trim())
	held, err := tn.mem.Reserved()
	require.NoError(t, err)
	require.Zero(t, held)
	_, err = tn.mem.Alloc(s, 2<<20) // leaked: Close frees it
	require.NoError(t, err)
	require.NoError(t, tn.close())
	require.Zero(t, d.drv.Live().Bytes)
	require.Zero(t, d.tracker.Used())
}

// TestPooledReusesBlocksOnTheirStream: a freed block waits on its stream's
// list, in the pool's chunk the device limit counts (not the quota), for
// the next allocation of its class on that stream alone.
func TestPooledReusesBlocksOnTheirStream(t *testing.T) {
	d := newDevice(t, 0, 0)
	tn := d.newTenant("a", 64<<20, pooledWith(64<<20), false)
	s1, s2 := tn.first(), tn.newStream()
	const op = "cuMemAllocFromPoolAsync"
	x, err := tn.mem.Alloc(s1, 3000)
	require.NoError(t, err)
	require.NoError(t, tn.mem.Free(s1, x))
	require.Equal(t, uint64(3072), s1.blocks.Bytes(), "kept at its class size")
	require.Zero(t, tn.acct.Used())
	require.Equal(t, uint64(cuda.PoolChunk), d.tracker.Used(), "the device limit counts the chunk the pool mapped, which holds the cached block")

	calls := d.drv.Calls(op)
	y, err := tn.mem.Alloc(s2, 3000)
	require.NoError(t, err)
	require.NotEqual(t, x, y, "s1's block is not in order on s2")
	require.Equal(t, calls+1, d.drv.Calls(op))

	z, err := tn.mem.Alloc(s1, 2900)
	require.NoError(t, err)
	require.Equal(t, x, z, "same class, same stream")
	require.Equal(t, calls+1, d.drv.Calls(op), "a cached block costs no driver call")
	require.Zero(t, s1.blocks.Bytes())
	require.Equal(t, uint64(3000+2900), tn.acct.Used(), "the quota counts what was asked for")
	require.Equal(t, uint64(cuda.PoolChunk), d.tracker.Used(), "the device limit what the pool maps")

	big, err := tn.mem.Alloc(s1, maxCachedSize+1)
	require.ErrorIs(t, err, memtrack.ErrQuotaExceeded)
	require.Zero(t, big)
	require.NoError(t, tn.mem.Free(s2, y))
	require.NoError(t, tn.mem.Free(s2, z))
	require.Equal(t, uint64(2*3072), s2.blocks.Bytes())
	require.NoError(t, tn.close())
	require.Zero(t, d.drv.Live().Bytes)
	require.Zero(t, d.tracker.Used())
}

// TestPooledFlushAndTrim: Flush gives one stream's list back; Trim every
// list and the pool's cache, waiting for the streams on which blocks were
// freed (the driver gives their chunks back only then), and no other.
func TestPooledFlushAndTrim(t *testing.T) {
	d := newDevice(t, 0, 0)
	tn := d.newTenant("a", 64<<20, pooledWith(64<<20), false)
	s1, s2, s3 := tn.first(), tn.newStream(), tn.newStream()
	for _, s := range []*stream{s2, s3} {
		p, err := tn.mem.Alloc(s, 1<<20)
		require.NoError(t, err)
		require.NoError(t, tn.mem.Free(s, p))
	}
	require.NoError(t, tn.mem.Flush(s2))
	require.Zero(t, s2.blocks.Bytes())
	require.Equal(t, uint64(cuda.PoolChunk), d.tracker.Used(), "the pool's chunk still counts")
	held, err := tn.mem.Reserved()
	require.NoError(t, err)
	require.Equal(t, uint64(cuda.PoolChunk), held)

	require.NoError(t, tn.mem.Trim())
	require.Zero(t, s3.blocks.Bytes())
	require.Zero(t, d.tracker.Used())
	require.Equal(t, []int64{0, 1, 1}, []int64{s1.syncs.Load(), s2.syncs.Load(), s3.syncs.Load()})
	require.Zero(t, d.drv.Live().Bytes, "the pool gave its chunk back")
	require.Zero(t, tn.in.Load())

	tn.closed.Store(true)
	require.ErrorIs(t, tn.mem.Trim(), errs.ErrClosed)
	tn.closed.Store(false)
	require.NoError(t, tn.close())
	require.Positive(t, tn.listed.Load())
	require.Equal(t, tn.listed.Load(), tn.released.Load(), "every list of the streams the engine took went back: a stream closed meanwhile waits for it")
}

// TestPooledNoLists: the driver's pool alone.
func TestPooledNoLists(t *testing.T) {
	d := newDevice(t, 0, 0)
	tn := d.newTenant("a", 64<<20, &PoolConfig{Quota: 64 << 20, NoLists: true}, false)
	s := tn.first()
	for range 3 {
		p, err := tn.mem.Alloc(s, 4096)
		require.NoError(t, err)
		require.NoError(t, tn.mem.Free(s, p))
	}
	require.Zero(t, s.blocks.Bytes())
	require.Equal(t, uint64(cuda.PoolChunk), d.tracker.Used(), "the driver's pool keeps its chunk, which the device limit counts")
	require.Equal(t, 3, d.drv.Calls("cuMemFreeAsync"))
	require.NoError(t, tn.close())
}

// TestPooledFreeTheDriverRefuses: a block the list has no room for and the
// driver refuses is the tenant's again, and can be freed later.
func TestPooledFreeTheDriverRefuses(t *testing.T) {
	d := newDevice(t, 0, 0)
	tn := d.newTenant("a", 64<<20, &PoolConfig{Quota: 64 << 20, NoLists: true}, false)
	s := tn.first()
	for _, n := range []uint64{4096, maxCachedSize + 1} { // through the lists' path, and past it
		tn.acct.SetLimit(2 << 30)
		p, err := tn.mem.Alloc(s, n)
		require.NoError(t, err)
		d.drv.FailNext("cuMemFreeAsync", cuda.ErrorInvalidValue)
		err = tn.mem.Free(s, p)
		require.ErrorIs(t, err, cuda.ErrorInvalidValue)
		require.NotContains(t, err.Error(), `tenant "a"`, "an engine's errors are bare: the face names the tenant")
		require.Equal(t, n, tn.acct.Used(), "still the tenant's")
		require.NoError(t, tn.mem.Free(s, p))
		require.Zero(t, tn.acct.Used())
	}
	require.NoError(t, tn.close())
	require.Zero(t, d.drv.Live().Bytes)
}

// freeRacer is the fake driver with a hook that runs inside
// cuMemFreeAsync, before the call returns: what another goroutine does
// while a free is in the driver.
type freeRacer struct {
	*fake.Driver
	during func()
}

func (d *freeRacer) MemFreeAsync(c cuda.Context, p cuda.DevicePtr, s cuda.Stream) error {
	if d.during != nil {
		d.during()
	}
	return d.Driver.MemFreeAsync(c, p, s)
}

// TestPooledRefusedFreeKeepsTheRecord: a cacheable block the list has no
// room for and the driver refuses stays the tenant's, recorded, however
// full its quota got meanwhile, as a plain engine's does: it can be freed
// again, and Close frees it. (The pooled engine used to settle the release
// before the driver call and record the block again after the refusal,
// which a quota filled meanwhile refused: the block was dropped from the
// books, a second Free was ErrUnknownPointer, and Close never freed it.)
func TestPooledRefusedFreeKeepsTheRecord(t *testing.T) {
	d := newDevice(t, 0, 0)
	const quota = 64 << 20
	tn := &tenant{d: d, name: "a"}
	var err error
	tn.acct, err = d.tracker.NewAccount("a", quota)
	require.NoError(t, err)
	s := tn.newStream()
	drv := &freeRacer{Driver: d.drv}
	tn.mem, err = NewPooled(Config{Driver: drv, Device: d, Account: tn.acct, Tracker: d.tracker, Peers: &d.peers, Owner: tn},
		PoolConfig{Quota: quota, Explicit: true, Keep: 1}) // Keep 1: no block fits on a list
	require.NoError(t, err)

	const n = 4096 // a cacheable size: the lists' path
	p, err := tn.mem.Alloc(s, n)
	require.NoError(t, err)
	var other memtrack.Reservation
	drv.during = func() {
		// Another request takes all the quota it can while the free is in
		// the driver.
		other, err = tn.acct.Reserve(quota - tn.acct.Used())
		require.NoError(t, err)
	}
	d.drv.FailNext("cuMemFreeAsync", cuda.ErrorInvalidValue)
	err = tn.mem.Free(s, p)
	drv.during = nil
	require.ErrorIs(t, err, cuda.ErrorInvalidValue)
	require.Equal(t, uint64(quota), tn.acct.Used(), "the block counts still, beside the other request's reservation")
	other.Cancel()
	require.Equal(t, uint64(n), tn.acct.Used())
	require.Len(t, tn.acct.Live(), 1, "still recorded")
	require.NoError(t, tn.mem.Free(s, p), "the tenant's again: it can be freed")
	require.Zero(t, tn.acct.Used())

	// Refused once more, then left to Close, which frees it.
	p, err = tn.mem.Alloc(s, n)
	require.NoError(t, err)
	d.drv.FailNext("cuMemFreeAsync", cuda.ErrorInvalidValue)
	require.ErrorIs(t, tn.mem.Free(s, p), cuda.ErrorInvalidValue)
	require.NoError(t, tn.close())
	require.Zero(t, d.drv.Live().Bytes, "Close freed the refused block")
}

// TestPeersTrimWhenTheDeviceIsFull: an allocation the device refuses takes
// back what the other pooled engines cache, for a pooled and a plain
// engine alike.
func TestPeersTrimWhenTheDeviceIsFull(t *testing.T) {
	for _, plain := range []bool{false, true} {
		d := newDevice(t, 64<<20, 0)
		a := d.newTenant("a", 64<<20, &PoolConfig{Quota: 64 << 20}, false)
		var bpool *PoolConfig
		if !plain {
			bpool = &PoolConfig{Quota: 64 << 20}
		}
		b := d.newTenant("b", 64<<20, bpool, false)
		p, err := a.mem.Alloc(a.first(), 48<<20)
		require.NoError(t, err)
		require.NoError(t, a.mem.Free(a.first(), p)) // cached: the device has 16 MiB free
		q, err := b.mem.Alloc(b.first(), 32<<20)
		require.NoError(t, err, "b must trim a's cache")
		require.Zero(t, a.first().blocks.Bytes())
		require.NoError(t, b.mem.Free(b.first(), q))
		require.NoError(t, a.close())
		require.NoError(t, b.close())
		require.Zero(t, d.drv.Live().Bytes)
	}
}

// TestPeersTrimAtTheDeviceLimit: the chunks a pool maps count against the
// device limit, cached blocks and all; a reservation the limit refuses
// empties the lists, trims the pools and retries.
func TestPeersTrimAtTheDeviceLimit(t *testing.T) {
	d := newDevice(t, 0, 64<<20)
	a := d.newTenant("a", 32<<20, pooledWith(32<<20), false)
	b := d.newTenant("b", 128<<20, nil, false)
	p, err := a.mem.Alloc(a.first(), 6<<20)
	require.NoError(t, err)
	require.NoError(t, a.mem.Free(a.first(), p))
	require.Equal(t, uint64(cuda.PoolChunk), d.tracker.Used())
	q, err := b.mem.Alloc(b.first(), 40<<20)
	require.NoError(t, err, "b's reservation must empty a's lists and trim its pool")
	require.Zero(t, a.first().blocks.Bytes())
	require.Equal(t, uint64(40<<20), d.tracker.Used())
	require.Equal(t, uint64(40<<20), d.drv.Live().Bytes)
	_, err = b.mem.Alloc(b.first(), 25<<20)
	var qe *memtrack.QuotaError
	require.ErrorAs(t, err, &qe, "nothing cached: the limit is real")
	require.Equal(t, memtrack.ScopeDevice, qe.Scope)
	require.NoError(t, b.mem.Free(b.first(), q))
	require.NoError(t, a.close())
	require.NoError(t, b.close())
}

// TestPeersSkipClosedAndClosing: an engine whose tenant is closing or
// paused is not trimmed (its TryEnter refuses), and a closed one has left
// its peers.
func TestPeersSkipClosedAndClosing(t *testing.T) {
	d := newDevice(t, 0, 0)
	a := d.newTenant("a", 64<<20, pooledWith(64<<20), false)
	b := d.newTenant("b", 64<<20, pooledWith(64<<20), false)
	cache := func() {
		p, err := b.mem.Alloc(b.first(), 1<<20)
		require.NoError(t, err)
		require.NoError(t, b.mem.Free(b.first(), p))
	}
	cache()
	require.Equal(t, 1, d.peers.trimOthers(a.mem.(*pooled)))
	cache()
	b.closed.Store(true)
	require.Zero(t, d.peers.trimOthers(a.mem.(*pooled)), "closing: not trimmed")
	b.closed.Store(false)
	b.paused.Store(true)
	require.Zero(t, d.peers.trimOthers(a.mem.(*pooled)), "paused by a Reshape: not trimmed, nor waited for")
	b.paused.Store(false)
	require.Equal(t, 1, d.peers.trimOthers(a.mem.(*pooled)))
	require.NoError(t, b.close())
	require.Len(t, d.peers.list(nil), 1)
	require.NoError(t, a.close())
	require.Empty(t, d.peers.list(nil))
}

// TestPooledQuotaOfAFragmentedPool: a pool full of blocks and gaps refuses
// with the tenant's quota, not the device's memory.
func TestPooledQuotaOfAFragmentedPool(t *testing.T) {
	d := newDevice(t, 0, 0)
	tn := d.newTenant("a", 64<<20, pooledWith(64<<20), false)
	s := tn.first()
	var blocks []cuda.DevicePtr
	for range 21 {
		p, err := tn.mem.Alloc(s, 3<<20)
		require.NoError(t, err)
		blocks = append(blocks, p)
	}
	for i := 0; i < len(blocks); i += 2 {
		require.NoError(t, tn.mem.Free(s, blocks[i]))
	}
	_, err := tn.mem.Alloc(s, 6<<20)
	require.ErrorIs(t, err, memtrack.ErrQuotaExceeded)
	require.ErrorIs(t, err, cuda.ErrorOutOfMemory)
	require.ErrorContains(t, err, "its pool holds 67108864 of the 67108864 bytes its 67108864-byte quota allows it (31457280 allocated")
	require.Equal(t, uint64(30<<20), tn.acct.Used())
	require.NoError(t, tn.close())
}

// TestGreenOrderedCalls: a green tenant's pool calls go without a context
// where the driver takes them, and in the primary context, learned once
// and logged, where it does not.
func TestGreenOrderedCalls(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		d := newDevice(t, 0, 0)
		if refuse {
			d.drv.RequireContext()
		}
		tn := d.newTenant("a", 64<<20, pooledWith(64<<20), true)
		for range 2 {
			p, err := tn.mem.Alloc(tn.first(), 8<<20)
			require.NoError(t, err)
			require.NoError(t, tn.mem.Free(tn.first(), p))
			require.NoError(t, tn.mem.Trim())
		}
		want, logged := unscoped.Yes, 0
		if refuse {
			want, logged = unscoped.No, 1
		}
		require.Equal(t, want, d.probe.State())
		require.Equal(t, logged, bytes.Count(d.log.Bytes(), []byte("needs a current context")))
		require.Zero(t, tn.in.Load())
		require.NoError(t, tn.close())
		require.Zero(t, d.drv.Live().Bytes)
	}
}

// TestPooledStormLeavesNothing: goroutines on shared streams allocate and
// free random sizes; no block is handed out twice, the quota holds, and
// Close gives everything back, leaks included.
func TestPooledStormLeavesNothing(t *testing.T) {
	const quota = 24 << 20
	d := newDevice(t, 0, 0)
	tn := d.newTenant("a", quota, pooledWith(quota), false)
	streams := []*stream{tn.first(), tn.newStream(), tn.newStream()}
	var (
		mu    sync.Mutex
		owned = map[cuda.DevicePtr]bool{}
		wg    sync.WaitGroup
	)
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 5))
			s := streams[g%len(streams)]
			var mine []cuda.DevicePtr
			for range 300 {
				if len(mine) > 0 && r.IntN(3) == 0 {
					k := r.IntN(len(mine))
					mu.Lock()
					delete(owned, mine[k])
					mu.Unlock()
					if err := tn.mem.Free(s, mine[k]); err != nil {
						panic(err)
					}
					mine = append(mine[:k], mine[k+1:]...)
					continue
				}
				p, err := tn.mem.Alloc(s, uint64(1+r.IntN(1<<20)))
				if errors.Is(err, memtrack.ErrQuotaExceeded) {
					continue
				}
				if err != nil {
					panic(err)
				}
				mu.Lock()
				if owned[p] {
					panic("a block handed out twice")
				}
				owned[p] = true
				mu.Unlock()
				if used := tn.acct.Used(); used > quota {
					panic("over the quota")
				}
				mine = append(mine, p)
			}
		})
	}
	wg.Wait()
	require.NotZero(t, tn.acct.Used(), "blocks left live, for Close to free")
	require.NoError(t, tn.close())
	require.Zero(t, d.drv.Live().Bytes)
	require.Zero(t, d.tracker.Used())
}

// TestOpenChooses: Open makes the engine the options chose, keeps Probe
// for a green tenant only, and bounds a pool by the device's limit.
func TestOpenChooses(t *testing.T) {
	d := newDevice(t, 0, 1<<30)
	tn := &tenant{d: d, name: "o"}
	var err error
	tn.acct, err = d.tracker.NewAccount("o", math.MaxUint64>>1)
	require.NoError(t, err)
	tn.newStream()
	cfg := Config{Driver: d.drv, Device: d, Account: tn.acct, Tracker: d.tracker, Peers: &d.peers, Owner: tn, Probe: &d.probe}

	e, err := Open(cfg, PoolConfig{Plain: true, Quota: 1 << 20})
	require.NoError(t, err)
	require.IsType(t, (*plain)(nil), e)
	require.Nil(t, e.Ops().Probe, "not green: no probe")
	require.NoError(t, e.Close(d.primary, nil))

	e, err = Open(cfg, PoolConfig{Green: true, Quota: math.MaxUint64, Explicit: true})
	require.NoError(t, err)
	require.IsType(t, (*pooled)(nil), e)
	require.Same(t, &d.probe, e.Ops().Probe)
	require.Equal(t, uint64(1<<30), e.(*pooled).maxSize, "the pool is bounded by the device's limit")
	require.NoError(t, e.Close(d.primary, nil))
}
