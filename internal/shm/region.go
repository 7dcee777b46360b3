package shm

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime/debug"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/spin"
	"golang.org/x/sys/unix"
)

// Magic identifies an initialised region ("FCSPSHM1" little-endian). It is
// published last by the creator, so a region with a valid magic is fully
// initialised.
const Magic uint64 = 0x314d485350534346

// Version is the layout version this package reads and writes.
// Version 2 added the generation in the state and usage words and the
// owner's identity (PID namespace, start time, token) on the state line.
// Version 3 added the joining state, moved the owner's PID from the state
// word to the identity, widened the generation to 56 bits, and tagged the
// identity and usage words with its low 20 bits (16 TiB per usage word).
const Version = 3

// DefaultPath is a conventional region path.
const DefaultPath = "/dev/shm/fcsp-go.region"

const (
	lineSize = 64
	pageSize = 4096

	// Header word offsets.
	headerMagic      = 0
	headerVersion    = 8
	headerSize       = 16
	headerDevices    = 24
	headerSlots      = 32
	headerBeatOff    = 40
	headerSlotOff    = 48
	headerSlotStride = 56

	// Bounds that keep a hostile header from making us map or index
	// absurd amounts of memory.
	MaxDevices = 64
	MaxSlots   = 4096
)

// ErrBadRegion is matched by every error about a region file that is not a
// valid region of this version and layout.
var ErrBadRegion = errors.New("shared region: bad region")

// Layout is the shape of a region.
type Layout struct {
	Devices int // GPUs on the node, 1..MaxDevices
	Slots   int // processes that may join at once, 1..MaxSlots
}

func (l Layout) validate() error {
	if l.Devices < 1 || l.Devices > MaxDevices {
		return fmt.Errorf("shared region: layout has %d devices; between 1 and %d are allowed", l.Devices, MaxDevices)
	}
	if l.Slots < 1 || l.Slots > MaxSlots {
		return fmt.Errorf("shared region: layout has %d slots; between 1 and %d are allowed", l.Slots, MaxSlots)
	}
	return nil
}

// geometry is everything derived from a Layout.
type geometry struct {
	beatOff, slotOff, slotStride, size uint64
}

func alignPage(n uint64) uint64 { return (n + pageSize - 1) &^ (pageSize - 1) }

func (l Layout) geometry() geometry {
	var g geometry
	g.beatOff = pageSize
	g.slotOff = g.beatOff + alignPage(uint64(l.Slots)*lineSize)
	g.slotStride = lineSize * uint64(1+l.Devices)
	g.size = g.slotOff + alignPage(uint64(l.Slots)*g.slotStride)
	return g
}

// ErrClosed is returned by a region's writes and Join after Close; it is
// the module's one ErrClosed.
var ErrClosed = errs.ErrClosed

// Options tune Open.
type Options struct {
	// OpenTimeout bounds how long Open waits for a concurrent creator to
	// publish the magic. Zero means 2 s.
	OpenTimeout time.Duration
	// Mode is the permission of a created file. Zero means 0o600.
	Mode os.FileMode
	// AllowForeign accepts an existing region file owned by another user
	// or writable by every user. Without it such a file is refused with
	// ErrUnsafeRegion: whoever can write the region can make every member
	// refuse allocations, or pass the node's limit.
	AllowForeign bool
}

// ErrUnsafeRegion is returned by Open for a region path that is a symbolic
// link, or a file that another user owns or every user may write (unless
// Options.AllowForeign).
var ErrUnsafeRegion = errors.New("shared region: unsafe region file")

// Region is a mapped shared region. Its methods, and those of the slots
// and usages obtained from it, are safe for concurrent use, Close included:
// Close waits for the calls that are inside the mapping, and calls after
// Close see a closed region (reads report zeros or nothing, writes and Join
// fail with ErrClosed), never unmapped memory.
type Region struct {
	// inside counts the calls that are reading or writing the mapping, with
	// regionClosing set once Close began: one word, so that a call either
	// enters before Close sees the count (and Close waits for it) or sees
	// the flag (and stays out).
	inside atomic.Int64
	lost   atomic.Pointer[error] // Lost's error, once a call faulted on the mapping
	path   string
	data   []byte
	layout Layout
	geo    geometry
	// MlockErr is the error of the best-effort mlock, nil if the region
	// is locked in memory. A region that is not locked still works; it
	// may only be paged out under memory pressure.
	MlockErr error
	created  bool
}

// Open maps the region at path, creating and initialising it with layout
// l if it does not exist. Two processes racing to create it are safe: the
// file is created with O_EXCL, so exactly one initialises it and publishes
// the magic last; the other waits (up to Options.OpenTimeout) for the
// magic and then validates the header. An existing region whose header is
// not exactly what l implies fails with ErrBadRegion.
func Open(path string, l Layout, opts *Options) (*Region, error) {
	if err := l.validate(); err != nil {
		return nil, err
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.OpenTimeout == 0 {
		o.OpenTimeout = 2 * time.Second
	}
	if o.Mode == 0 {
		o.Mode = 0o600
	}
	g := l.geometry()
	// O_EXCL never follows a link; O_NOFOLLOW keeps the attach from
	// following one planted in place of the region.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, o.Mode)
	switch {
	case err == nil:
		defer f.Close()
		return create(f, path, l, g)
	case errors.Is(err, fs.ErrExist):
		f, err = os.OpenFile(path, os.O_RDWR|unix.O_NOFOLLOW, 0)
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("%w: %s is a symbolic link; give the region's own path", ErrUnsafeRegion, path)
		}
		if err != nil {
			return nil, fmt.Errorf("shared region: open region: %w", err)
		}
		defer f.Close()
		if !o.AllowForeign {
			if err := checkOwner(f, path); err != nil {
				return nil, err
			}
		}
		return attach(f, path, l, g, o.OpenTimeout)
	default:
		return nil, fmt.Errorf("shared region: create region: %w", err)
	}
}

func create(f *os.File, path string, l Layout, g geometry) (*Region, error) {
	if err := f.Truncate(int64(g.size)); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("shared region: size region %s: %w", path, err)
	}
	r, err := mapRegion(f, path, l, g)
	if err != nil {
		os.Remove(path)
		return nil, err
	}
	r.created = true
	// ftruncate zero-fills, so counters and slot states start at 0 (free).
	r.word(headerVersion).Store(Version)
	r.word(headerSize).Store(g.size)
	r.word(headerDevices).Store(uint64(l.Devices))
	r.word(headerSlots).Store(uint64(l.Slots))
	r.word(headerBeatOff).Store(g.beatOff)
	r.word(headerSlotOff).Store(g.slotOff)
	r.word(headerSlotStride).Store(g.slotStride)
	// Publish last: sync/atomic operations are sequentially consistent
	// in Go's memory model, so a reader that loads Magic sees every store
	// above. The kernel keeps one page cache copy for all mappings of the
	// file, so the same holds across processes.
	r.word(headerMagic).Store(Magic)
	return r, nil
}

func attach(f *os.File, path string, l Layout, g geometry, timeout time.Duration) (*Region, error) {
	deadline := time.Now().Add(timeout)
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrBadRegion, path, fmt.Sprintf(format, args...))
	}
	// Wait for the creator to size the file and publish the magic.
	var hdr [headerSlotStride + 8]byte
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		n, err := f.ReadAt(hdr[:], 0)
		if n == len(hdr) && le64(hdr[headerMagic:]) != 0 {
			break
		}
		if err != nil && err != io.EOF { // EOF: creator has not sized it yet
			return nil, fmt.Errorf("shared region: read region header: %w", err)
		}
		if time.Now().After(deadline) {
			return nil, bad("magic not published within %v (creator died during initialisation? remove the file)", timeout)
		}
		time.Sleep(delay)
	}
	if m := le64(hdr[headerMagic:]); m != Magic {
		return nil, bad("magic %#x, want %#x", m, Magic)
	}
	if v := le64(hdr[headerVersion:]); v != Version {
		return nil, bad("version %d, this build reads version %d", v, Version)
	}
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("shared region: stat region: %w", err)
	}
	if sz := le64(hdr[headerSize:]); sz != uint64(st.Size()) || sz != g.size {
		return nil, bad("header says %d bytes, file has %d, layout %+v needs %d", sz, st.Size(), l, g.size)
	}
	if d, s := le64(hdr[headerDevices:]), le64(hdr[headerSlots:]); d != uint64(l.Devices) || s != uint64(l.Slots) {
		return nil, bad("region has %d devices and %d slots, want %d and %d", d, s, l.Devices, l.Slots)
	}
	if le64(hdr[headerBeatOff:]) != g.beatOff ||
		le64(hdr[headerSlotOff:]) != g.slotOff || le64(hdr[headerSlotStride:]) != g.slotStride {
		return nil, bad("section offsets do not match layout %+v", l)
	}
	return mapRegion(f, path, l, g)
}

// checkOwner refuses a region file that another user owns or that every
// user may write.
func checkOwner(f *os.File, path string) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("shared region: stat region: %w", err)
	}
	if uid := uint32(os.Geteuid()); st.Uid != uid {
		return fmt.Errorf("%w: %s is owned by uid %d, this process runs as uid %d (opt in to share it across users)", ErrUnsafeRegion, path, st.Uid, uid)
	}
	if st.Mode&0o002 != 0 {
		return fmt.Errorf("%w: %s has mode %#o, writable by every user (make it 0600 or 0660, or opt in)", ErrUnsafeRegion, path, st.Mode&0o777)
	}
	return nil
}

// le64 decodes a little-endian word; the region is only shared between
// processes of one machine, and amd64/arm64 are little-endian.
func le64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

func mapRegion(f *os.File, path string, l Layout, g geometry) (*Region, error) {
	data, err := unix.Mmap(int(f.Fd()), 0, int(g.size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shared region: mmap %s: %w", path, err)
	}
	r := &Region{path: path, data: data, layout: l, geo: g}
	// Best effort: a paged-out accounting page would put a disk read on
	// the allocation path. Unprivileged processes commonly get EPERM or
	// ENOMEM (RLIMIT_MEMLOCK); the region still works, so only report.
	if err := unix.Mlock(data); err != nil {
		r.MlockErr = fmt.Errorf("shared region: mlock %s (continuing unlocked): %w", path, err)
	}
	return r, nil
}

const (
	regionClosing = 1 << 62
	regionLost    = 1 << 61 // a call faulted on the mapping (Lost)
)

// enter reports whether the mapping may be used, counting the caller in
// until exit; false once Close began or the region was lost.
func (r *Region) enter() bool {
	if r.inside.Add(1)&(regionClosing|regionLost) != 0 {
		r.inside.Add(-1)
		return false
	}
	return true
}

// exit ends a call that entered. Deferred as
//
//	defer r.exit(debug.SetPanicOnFault(true), &err)
//
// it turns a fault on the mapping into the call's failure: a region file
// truncated while mapped (a stray truncate, a region reset by hand) makes
// every access past its new end a SIGBUS, which killed every member. The
// region is then lost: err, where the call returns one (nil: it reports
// zeros or false), is Lost's ErrBadRegion, and later calls stay out of the
// mapping. onFault, the goroutine's setting before the call, is restored;
// a panic that is not a fault on the mapping goes on.
func (r *Region) exit(onFault bool, err *error) {
	debug.SetPanicOnFault(onFault)
	r.inside.Add(-1)
	v := recover()
	if v == nil {
		return
	}
	f, ok := v.(interface{ Addr() uintptr })
	if !ok {
		panic(v)
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(r.data)))
	off := f.Addr() - start
	if f.Addr() < start || off >= uintptr(len(r.data)) {
		panic(v) // not ours
	}
	e := fmt.Errorf("%w: %s: a fault at byte %d of the mapping (the file was truncated under this process; members must reopen it)", ErrBadRegion, r.path, off)
	r.lost.CompareAndSwap(nil, &e)
	r.inside.Or(regionLost)
	if err != nil {
		*err = r.Lost()
	}
}

// Lost is the ErrBadRegion error of the fault that lost the region (its
// file truncated while mapped), nil while it was not: the region's writes
// and Join then fail with it, and its reads report zeros or nothing.
func (r *Region) Lost() error {
	if e := r.lost.Load(); e != nil {
		return *e
	}
	return nil
}

// stopped is the error of a write or Join that could not enter: Lost's, or
// ErrClosed.
func (r *Region) stopped() error {
	if err := r.Lost(); err != nil {
		return err
	}
	return ErrClosed
}

func (r *Region) closed() bool { return r.inside.Load()&regionClosing != 0 }

// Close unmaps the region, once the calls inside it have returned (they
// never block). The file stays; remove it with os.Remove when no process
// needs it. Close does not leave the region: call Slot.Leave first. After
// Close, DeviceUsed and Usage.Load report 0, Slots and Reap nothing, Owned,
// Beat and Leave false, and Join, Usage.Add and Usage.Sub fail with
// ErrClosed. A second Close returns nil.
func (r *Region) Close() error {
	for {
		v := r.inside.Load()
		if v&regionClosing != 0 {
			return nil
		}
		if r.inside.CompareAndSwap(v, v|regionClosing) {
			break
		}
	}
	spin.Until(func() bool { return r.inside.Load()&^regionLost == regionClosing }, 10*time.Microsecond)
	return unix.Munmap(r.data)
}

// Path returns the region's file path.
func (r *Region) Path() string { return r.path }

// Layout returns the region's layout.
func (r *Region) Layout() Layout { return r.layout }

// Created reports whether this Open created and initialised the region.
func (r *Region) Created() bool { return r.created }

// word returns the Counter at byte offset off. off is always derived from
// the validated geometry and is 8-byte aligned; mmap returns page-aligned
// memory, so the word is aligned for 64-bit atomics.
func (r *Region) word(off uint64) Counter {
	return Counter{(*uint64)(unsafe.Pointer(&r.data[off]))}
}

func (r *Region) checkDev(dev int) {
	if dev < 0 || dev >= r.layout.Devices {
		panic(fmt.Sprintf("shared region: device %d out of range [0,%d)", dev, r.layout.Devices))
	}
}

func (r *Region) checkSlot(i int) {
	if i < 0 || i >= r.layout.Slots {
		panic(fmt.Sprintf("shared region: slot %d out of range [0,%d)", i, r.layout.Slots))
	}
}

// DeviceUsed returns the node-wide bytes in use on device dev: the sum of
// every slot's usage of it. It costs one load per slot (O(Slots), never
// O(tenants)). See the package comment for why the total is a sum rather
// than a counter of its own.
//
// Only active slots count: usage left in a slot that is free or being
// reaped (a member that wrote after it was reaped, or a crash in the middle
// of a reap) is nobody's, and counting it would shrink the node's limit
// until the slot's next Join cleared it.
//
// After Close, and once the region was lost, it returns 0.
func (r *Region) DeviceUsed(dev int) uint64 {
	r.checkDev(dev)
	if !r.enter() {
		return 0
	}
	defer r.exit(debug.SetPanicOnFault(true), nil)
	var sum uint64
	off := r.geo.slotOff
	for i := 0; i < r.layout.Slots; i++ {
		if st, gen := unpackState(r.word(off).Load()); st == StateActive {
			if v, ok := ofGen(r.word(off+uint64(1+dev)*lineSize).Load(), gen); ok {
				sum += v
			}
		}
		off += r.geo.slotStride
	}
	return sum
}

func (r *Region) stateOff(i int) uint64 { return r.geo.slotOff + uint64(i)*r.geo.slotStride }

func (r *Region) stateWord(i int) Counter { return r.word(r.stateOff(i)) }

func (r *Region) beatWord(i int) Counter {
	return r.word(r.geo.beatOff + uint64(i)*lineSize)
}

func (r *Region) usageWord(i, dev int) Counter {
	return r.word(r.geo.slotOff + uint64(i)*r.geo.slotStride + uint64(1+dev)*lineSize)
}
