package smpart

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/freelist"
	"github.com/fcsp-go/fcsp-go/internal/lockorder"
)

// ErrGranularity means a requested SM count is not one the split (or the
// partition's layouts) can make; the message names the sizes it can. Its
// text has no package prefix: it is read inside fcsp's tenant "x": Op:.
var ErrGranularity = errors.New("unsupported SM count")

// ErrInsufficientSMs means the request needs more SMs than are free.
var ErrInsufficientSMs = errors.New("not enough free SMs")

// ErrClosed is returned by calls on a closed Device, Split or Partition;
// it is the module's one ErrClosed (fcsp.ErrClosed, memtrack.ErrClosed, ...).
var ErrClosed = errs.ErrClosed

// Device is one GPU's SM resource, with the device's primary context
// retained (green contexts retain it too; holding it avoids re-initialising
// it for every green context).
type Device struct {
	drv     cuda.Driver      // set once before sharing
	dev     cuda.Device      // set once before sharing
	primary atomic.Uintptr   // atomic; cuda.Context, stored by Open
	api     int              // set once before sharing
	res     cuda.DevResource // set once before sharing
	info    cuda.SMInfo      // set once before sharing
	home    home             // set once before sharing; where its green contexts are kept (greens.go)
	shelved bool             // set once before sharing; false: not kept (a driver that cannot name a home)
	claimed bool             // set once before sharing; it holds the device's SM map (ClaimMap, under greens.mu)

	mu     lockorder.Mutex[lockorder.Device] // protects closed; held across the device's close
	closed bool                              // guarded by mu
	idle   freelist.List[cuda.Stream]        // own lock; primary-context streams released for reuse (primarystreams.go)
}

// Open retains device ordinal's primary context and reads its SM resource.
// On drivers older than API 13.0, which do not report minSmPartitionSize,
// the granularity is learned by performing a split at a minimum of one SM.
func Open(drv cuda.Driver, ordinal int) (*Device, error) {
	api, err := drv.DriverVersion()
	if err != nil {
		return nil, err
	}
	if api < 12040 {
		return nil, fmt.Errorf("greenctx: driver API %d has no green contexts (need 12040 or newer): %w", api, cuda.ErrNotAvailable)
	}
	dev, err := drv.DeviceGet(ordinal)
	if err != nil {
		return nil, fmt.Errorf("greenctx: device %d: %w", ordinal, err)
	}
	primary, err := drv.PrimaryCtxRetain(dev)
	if err != nil {
		return nil, err
	}
	d := &Device{drv: drv, dev: dev, api: api}
	d.primary.Store(uintptr(primary))
	if d.res, err = drv.DeviceGetDevResource(dev, cuda.ResourceSM); err != nil {
		_ = drv.PrimaryCtxRelease(dev)
		return nil, err
	}
	d.info = d.res.SMInfo(api)
	if d.info.MinPartition == 0 {
		groups, _, n, err := drv.DevSmResourceSplitByCount(d.res, 0, 1, int(d.info.Count))
		if err != nil || n == 0 {
			_ = drv.PrimaryCtxRelease(dev)
			return nil, fmt.Errorf("greenctx: learning the split granularity: %w", err)
		}
		d.info.MinPartition = groups[0].SMCount()
		d.info.CoscheduledAlignment = groups[0].SMCount()
	}
	if d.home, d.shelved = homeOf(drv, dev); d.shelved {
		openShelf(d.home)
	}
	return d, nil
}

// Driver returns the driver the device was opened with.
func (d *Device) Driver() cuda.Driver { return d.drv }

// Ordinal is the CUdevice handle.
func (d *Device) Ordinal() cuda.Device { return d.dev }

// Primary is the retained primary context.
func (d *Device) Primary() cuda.Context { return cuda.Context(d.primary.Load()) }

// APIVersion is cuDriverGetVersion's number.
func (d *Device) APIVersion() int { return d.api }

// SMs is the device's SM count as the driver's SM resource reports it.
func (d *Device) SMs() int { return int(d.info.Count) }

// Info is the decoded SM resource: count, minimum partition, alignment.
func (d *Device) Info() cuda.SMInfo { return d.info }

// Granularity is the smallest group the driver will cut.
func (d *Device) Granularity() int { return int(d.info.MinPartition) }

// GroupSize is the SM count of each group a split at minCount asks for:
// the request raised to the minimum partition and rounded up to the
// co-scheduling alignment, capped at the device. Count and remainder come
// from the driver.
func (d *Device) GroupSize(minCount int) int {
	g := max(minCount, int(d.info.MinPartition), 1)
	if a := max(int(d.info.CoscheduledAlignment), 1); g%a != 0 {
		g += a - g%a
	}
	// Rounding past the device gives one group of every SM (the H200 does
	// this for minimum counts 129 to 132).
	return min(g, d.SMs())
}

// Row is one line of a split table.
type Row struct {
	MinCount  int // what was asked
	Groups    int // how many groups the driver made
	GroupSMs  int // SMs in each group
	Remainder int // SMs left over
}

// Predict says what a split at minCount would make, asking the driver for
// the group count with a null result array (which performs nothing).
func (d *Device) Predict(minCount int) (Row, error) {
	return d.predict(minCount, 0, d.GroupSize(minCount))
}

// predict is Predict for a split made with flags, whose groups are size SMs.
func (d *Device) predict(minCount int, flags uint32, size int) (Row, error) {
	if err := d.checkMinCount(minCount); err != nil {
		return Row{}, err
	}
	_, _, n, err := d.drv.DevSmResourceSplitByCount(d.res, flags, uint32(minCount), 0)
	if err != nil {
		return Row{}, err
	}
	return Row{MinCount: minCount, Groups: n, GroupSMs: size, Remainder: d.SMs() - n*size}, nil
}

// Measure performs a split at minCount and reads back what the driver made.
// Nothing is provisioned: a split only describes SMs.
func (d *Device) Measure(minCount int) (Row, error) { return d.measure(minCount, 0) }

func (d *Device) measure(minCount int, flags uint32) (Row, error) {
	s, err := d.SplitWith(minCount, flags)
	if err != nil {
		return Row{}, err
	}
	return Row{MinCount: minCount, Groups: len(s.groups), GroupSMs: s.GroupSMs(), Remainder: int(s.rem.SMCount())}, nil
}

// Table predicts and measures a split at each minimum count.
func (d *Device) Table(minCounts ...int) (predicted, measured []Row, err error) {
	return d.TableWith(0, minCounts...)
}

// TableWith is Table for splits made with flags, as a pool made
// WithoutCoscheduling makes them (cuda.SplitIgnoreCoscheduling). The SM
// resource reports the co-scheduled granularity only, so such a split's
// predicted group size is the size its measured split made; the count is
// still the null split's.
func (d *Device) TableWith(flags uint32, minCounts ...int) (predicted, measured []Row, err error) {
	for _, m := range minCounts {
		r, err := d.measure(m, flags)
		if err != nil {
			return nil, nil, err
		}
		size := d.GroupSize(m)
		if flags != 0 {
			size = r.GroupSMs
		}
		p, err := d.predict(m, flags, size)
		if err != nil {
			return nil, nil, err
		}
		predicted, measured = append(predicted, p), append(measured, r)
	}
	return predicted, measured, nil
}

// Close releases the primary context. Partitions must be closed first.
// The last Device of its driver and ordinal in the process destroys the
// green contexts kept for reuse first (greens.go).
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	errs := []error{d.destroyIdle()}
	if d.shelved {
		for _, g := range closeShelf(d.home, d.claimed) {
			errs = append(errs, d.drv.GreenCtxDestroy(g))
		}
	}
	return errors.Join(append(errs, d.drv.PrimaryCtxRelease(d.dev))...)
}
