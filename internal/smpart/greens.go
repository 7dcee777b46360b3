package smpart

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/lockorder"
)

// Green contexts are kept for reuse, not destroyed. Each one the driver
// makes costs device memory (4 MiB on an H100, driver 580) that
// cuGreenCtxDestroy does not give back while the device's primary context
// lives (docs/BENCHMARKS.md, run UU; issue 37), so a process that opens and
// closes pools, or whose commons follows the partitions, would lose memory
// without bound. A green context is kept under the name of the SMs it
// holds (a greenKey: which groups of which split), for any Device of the
// same driver and ordinal in the process, and destroyed when the last such
// Device closes, before the primary context is released.
//
// Only green contexts whose streams were all waited for and destroyed
// without error are kept: a failed call may mean a faulted context.

// maxIdleGreens bounds the green contexts kept per device; past it one is
// destroyed (and its memory lost to the driver, as without the shelf).
var maxIdleGreens = 64

// greenKey names a set of SMs as the split named it: the split's minimum
// count and flags, the groups (sorted: the order of a descriptor's
// resources does not change its SMs) and the remainder. Splits of one
// device at one count are the same cut (the driver's split is a function
// of the device's resource), so equal keys mean equal SMs.
type greenKey string

func (s *Split) greenKey(idx []int, rem bool) greenKey {
	sorted := slices.Sorted(slices.Values(idx))
	return greenKey(fmt.Sprintf("%d/%#x:%v+%t", s.minCount, s.flags, sorted, rem))
}

// home is a device of one driver (a pool's guard unwrapped: every pool
// of the process shares the one driver beneath).
type home struct {
	drv cuda.Driver
	dev cuda.Device
}

// homeOf names drv's device dev; ok is false for a driver value that
// cannot be a map key (a test's wrapper), whose green contexts are then
// destroyed as before.
func homeOf(drv cuda.Driver, dev cuda.Device) (h home, ok bool) {
	for {
		u, ok := drv.(interface{ Unwrap() cuda.Driver })
		if !ok {
			break
		}
		drv = u.Unwrap()
	}
	if t := reflect.TypeOf(drv); t == nil || t.Kind() != reflect.Pointer {
		return home{}, false
	}
	return home{drv, dev}, true
}

// shelf is one device's kept green contexts, and whether a Device holds
// its SM map (ClaimMap).
type shelf struct {
	open    int                          // guarded by greens.mu; Devices open on it
	claimed bool                         // guarded by greens.mu; a pool (or greenctx.Device) hands out its SMs
	idle    map[greenKey][]cuda.GreenCtx // guarded by greens.mu
	n       int                          // guarded by greens.mu
}

// greens is the process's shelves. Its lock makes no driver call: the
// callers create and destroy outside it (docs/LOCKS.md).
var greens struct {
	mu lockorder.Mutex[lockorder.Greens] // protects the following field
	by map[home]*shelf                   // guarded by mu
}

// openShelf counts one more Device open on h.
func openShelf(h home) {
	greens.mu.Lock()
	defer greens.mu.Unlock()
	if greens.by == nil {
		greens.by = map[home]*shelf{}
	}
	s := greens.by[h]
	if s == nil {
		s = &shelf{idle: map[greenKey][]cuda.GreenCtx{}}
		greens.by[h] = s
	}
	s.open++
}

// closeShelf counts one Device fewer on h (one that held the SM map:
// claimed) and, when it was the last, returns every kept green context
// for the caller to destroy.
func closeShelf(h home, claimed bool) []cuda.GreenCtx {
	greens.mu.Lock()
	defer greens.mu.Unlock()
	s := greens.by[h]
	if s == nil {
		return nil
	}
	if claimed {
		s.claimed = false
	}
	if s.open--; s.open > 0 {
		return nil
	}
	delete(greens.by, h)
	var all []cuda.GreenCtx
	for _, gs := range s.idle {
		all = append(all, gs...)
	}
	return all
}

// ClaimMap makes d the one Device of the process that hands out its
// device's SMs: a pool cuts one split and hands out groups of it, and a
// second pool on the same device, with a split of its own, would hand the
// same SMs out again. errs.ErrDeviceInUse while another Device holds the
// claim; the claim ends with d's Close. A driver that cannot name its
// device (a test's wrapper) claims nothing.
func (d *Device) ClaimMap() error {
	if !d.shelved {
		return nil
	}
	greens.mu.Lock()
	defer greens.mu.Unlock()
	s := greens.by[d.home]
	if s.claimed {
		return fmt.Errorf("%w: device %d's SMs are handed out by another pool (or greenctx.Device) of this process; "+
			"share that one (it is safe for concurrent use), or close it first", errs.ErrDeviceInUse, int(d.dev))
	}
	s.claimed, d.claimed = true, true
	return nil
}

// takeGreen gives a kept green context over key's SMs away.
func takeGreen(h home, key greenKey) (cuda.GreenCtx, bool) {
	greens.mu.Lock()
	defer greens.mu.Unlock()
	s := greens.by[h]
	if s == nil || len(s.idle[key]) == 0 {
		return 0, false
	}
	gs := s.idle[key]
	g := gs[len(gs)-1]
	if len(gs) == 1 {
		delete(s.idle, key)
	} else {
		s.idle[key] = gs[:len(gs)-1]
	}
	s.n--
	return g, true
}

// putGreen keeps g; false where no Device is open on h or the shelf is
// full, and the caller destroys it.
func putGreen(h home, key greenKey, g cuda.GreenCtx) bool {
	greens.mu.Lock()
	defer greens.mu.Unlock()
	s := greens.by[h]
	if s == nil || s.n >= maxIdleGreens {
		return false
	}
	s.idle[key] = append(s.idle[key], g)
	s.n++
	return true
}

// greenCtx makes a green context over res (named key), or takes a kept
// one.
func (d *Device) greenCtx(desc cuda.ResourceDesc, key greenKey) (cuda.GreenCtx, error) {
	if d.shelved {
		if g, ok := takeGreen(d.home, key); ok {
			return g, nil
		}
	}
	return d.drv.GreenCtxCreate(desc, d.dev, cuda.GreenCtxDefaultStream)
}

// letGo keeps g for reuse, or destroys it where it cannot be kept (clean
// is false after a failed call on its streams).
func (d *Device) letGo(g cuda.GreenCtx, key greenKey, clean bool) error {
	if clean && d.shelved && putGreen(d.home, key, g) {
		return nil
	}
	return d.drv.GreenCtxDestroy(g)
}

// KeptGreenCtxs is how many green contexts the process keeps for reuse on
// the device (of its driver and ordinal): what is let go and not destroyed
// until the device's last Device closes.
func (d *Device) KeptGreenCtxs() int {
	greens.mu.Lock()
	defer greens.mu.Unlock()
	if s := greens.by[d.home]; s != nil && d.shelved {
		return s.n
	}
	return 0
}
