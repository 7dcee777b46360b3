package greenctx

import (
	"errors"
	"fmt"
	"sync"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/driverhook"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// The errors this package returns, matched with errors.Is. Each is the
// module's one definition (fcsp.ErrGranularity is the same value, and so on).
var (
	// ErrNoDriver: no NVIDIA driver could be loaded.
	ErrNoDriver = cuda.ErrNoDriver
	// ErrNotAvailable: the driver has no green contexts (they need CUDA
	// 12.4 or newer) or lacks another entry point this package calls.
	ErrNotAvailable = cuda.ErrNotAvailable
	// ErrGranularity: an SM count is not a whole number of the split's
	// groups; the message names the group size and the nearest legal counts.
	ErrGranularity = smpart.ErrGranularity
	// ErrInsufficientSMs: the split has not enough free SMs left.
	ErrInsufficientSMs = smpart.ErrInsufficientSMs
	// ErrClosed: the Device, Split or Partition is closed.
	ErrClosed = smpart.ErrClosed
	// ErrInvalidArgument: an argument is out of range (a negative ordinal, a
	// minimum count below 1 or past the device's SMs); the message says
	// what is allowed.
	ErrInvalidArgument = errs.ErrInvalidArgument
	// ErrDeviceInUse: Open of a device this process hands out SMs of
	// already (an fcsp pool, or another Device): two maps of one device's
	// SMs would hand the same SMs out twice.
	ErrDeviceInUse = errs.ErrDeviceInUse
)

func init() {
	// fcsptest opens simulated devices through this hook, so that no
	// function of this package takes the (internal) driver type.
	driverhook.OpenGreen = func(drv cuda.Driver, ordinal int) (any, error) { return open(drv, ordinal) }
}

// Device is one GPU's SMs. Close releases it, with every Split and
// Partition made from it.
type Device struct {
	dev *smpart.Device

	// life is held for reading by calls in flight and for writing by
	// Close, so that Close never releases the device under a Take.
	life   sync.RWMutex
	closed bool
	mu     sync.Mutex // splits
	splits map[*Split]struct{}
}

// Open opens device ordinal through the NVIDIA driver (libcuda.so.1). Without
// a driver the error matches ErrNoDriver; with a driver older than CUDA 12.4,
// which has no green contexts, ErrNotAvailable.
func Open(ordinal int) (*Device, error) {
	if ordinal < 0 {
		return nil, fmt.Errorf("%w: device ordinal %d; want 0 or more", ErrInvalidArgument, ordinal)
	}
	lib, err := cuda.Load()
	if err != nil {
		return nil, err
	}
	return open(lib, ordinal)
}

func open(drv cuda.Driver, ordinal int) (*Device, error) {
	if ordinal < 0 {
		return nil, fmt.Errorf("%w: device ordinal %d; want 0 or more", ErrInvalidArgument, ordinal)
	}
	if n, err := drv.DeviceCount(); err == nil && ordinal >= n {
		return nil, fmt.Errorf("%w: device ordinal %d; this machine has %d devices (0 to %d)", ErrInvalidArgument, ordinal, n, n-1)
	}
	d, err := smpart.Open(drv, ordinal)
	if err != nil {
		return nil, err
	}
	if err := d.ClaimMap(); err != nil { // an fcsp pool hands its SMs out
		return nil, errors.Join(err, d.Close())
	}
	return &Device{dev: d, splits: map[*Split]struct{}{}}, nil
}

// enter admits a call; the caller runs exit when done.
func (d *Device) enter() error {
	d.life.RLock()
	if d.closed {
		d.life.RUnlock()
		return ErrClosed
	}
	return nil
}

func (d *Device) exit() { d.life.RUnlock() }

// SMs is the device's SM count, as the driver reports it.
func (d *Device) SMs() int { return d.dev.SMs() }

// Granularity is the smallest group of SMs the driver cuts (8 on Hopper).
func (d *Device) Granularity() int { return d.dev.Granularity() }

func (d *Device) String() string {
	return fmt.Sprintf("device with %d SMs in groups of at least %d", d.SMs(), d.Granularity())
}

// Row is one line of a split table: what a cut at MinCount makes.
type Row struct {
	MinCount  int // the minimum group size asked for
	Groups    int // how many groups the driver makes
	GroupSMs  int // SMs in each group
	Remainder int // SMs no group holds
}

func (d *Device) checkMin(minCount int) error {
	if minCount < 1 || minCount > d.SMs() {
		return fmt.Errorf("%w: minimum count %d; this device has %d SMs (ask for 1 to %d)", ErrInvalidArgument, minCount, d.SMs(), d.SMs())
	}
	return nil
}

// Predict says what a cut at minCount would make, asking the driver without
// cutting anything.
func (d *Device) Predict(minCount int) (Row, error) {
	if err := d.enter(); err != nil {
		return Row{}, err
	}
	defer d.exit()
	if err := d.checkMin(minCount); err != nil {
		return Row{}, err
	}
	r, err := d.dev.Predict(minCount)
	return Row(r), err
}

// Table predicts and performs a cut at each minimum count and returns both
// tables (they agree; a disagreement is the SDK's bug). Cutting provisions
// nothing: a split only describes SMs.
func (d *Device) Table(minCounts ...int) (predicted, measured []Row, err error) {
	if err := d.enter(); err != nil {
		return nil, nil, err
	}
	defer d.exit()
	for _, m := range minCounts {
		if err := d.checkMin(m); err != nil {
			return nil, nil, err
		}
	}
	p, m, err := d.dev.Table(minCounts...)
	if err != nil {
		return nil, nil, err
	}
	for i := range p {
		predicted, measured = append(predicted, Row(p[i])), append(measured, Row(m[i]))
	}
	return predicted, measured, nil
}

// Split cuts the device into groups of at least minCount SMs, honouring SM
// co-scheduling (the driver's default). Partitions are then taken from it.
func (d *Device) Split(minCount int) (*Split, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer d.exit()
	if err := d.checkMin(minCount); err != nil {
		return nil, err
	}
	s, err := d.dev.Split(minCount)
	if err != nil {
		return nil, err
	}
	sp := &Split{dev: d, s: s, parts: map[*Partition]struct{}{}}
	d.mu.Lock()
	d.splits[sp] = struct{}{}
	d.mu.Unlock()
	return sp, nil
}

// Close closes every Split made from the device (and so every Partition),
// waiting for their streams, then releases the device. It is idempotent.
func (d *Device) Close() error {
	d.life.Lock()
	defer d.life.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	d.mu.Lock()
	splits := d.splits
	d.splits = nil
	d.mu.Unlock()
	var errList []error
	for s := range splits {
		errList = append(errList, s.close(false))
	}
	errList = append(errList, d.dev.Close())
	return errors.Join(errList...)
}
