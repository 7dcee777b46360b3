package smpart

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/dra"
	"github.com/fcsp-go/fcsp-go/internal/errs"
)

// What a pool (fcsp.Pool) asks of its device, in the order Open asks it:
// the device, claimed and described (OpenPool), the split its partitions
// are cut from with the partitions prewarmed, then each tenant's
// partition.

// OpenIndex opens device index of drv, refusing an index past the
// machine's GPUs. ctx is checked before the device's context is made.
func OpenIndex(ctx context.Context, drv cuda.Driver, index int) (*Device, error) {
	if n, err := drv.DeviceCount(); err != nil {
		return nil, err
	} else if index >= n {
		return nil, fmt.Errorf("%w: device index %d; this machine has %d GPU(s)", errs.ErrInvalidArgument, index, n)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return Open(drv, index)
}

// PoolDevice is how a pool asks for its device (OpenPool).
type PoolDevice struct {
	Index     int          // among the driver's devices, or among a DRA claim's (DRA)
	DRA       string       // a DRA claim's device metadata file (fcsp's WithDRAMetadata); "": none
	Simulated bool         // the driver is the simulator
	Queues    int          // the process's hardware work queues (WorkQueues)
	Environ   []string     // the pool's environment list, over the process's (Caveats)
	Log       *slog.Logger // hears each caveat, as a warning
}

// OpenPool opens a pool's device and describes it: the device a DRA claim
// got, where one is given (the index then counts the claim's devices),
// opened (OpenIndex) and made the process's one map of its SMs (ClaimMap:
// a second pool would hand the same SMs out again), then described, each
// caveat logged as a warning. On an error nothing stays open.
func OpenPool(ctx context.Context, drv cuda.Driver, pd PoolDevice) (*Device, Description, error) {
	index := pd.Index
	if pd.DRA != "" { // a DRA claim's device: index counts the claim's
		var err error
		if index, err = dra.Ordinal(drv, pd.DRA, index); err != nil {
			return nil, Description{}, err
		}
	}
	d, err := OpenIndex(ctx, drv, index)
	if err != nil {
		return nil, Description{}, err
	}
	if err := d.ClaimMap(); err != nil { // one pool hands out a device's SMs
		return nil, Description{}, errors.Join(err, d.Close())
	}
	desc, err := d.Describe(index, pd.Simulated, pd.Queues, Caveats(pd.Environ))
	for _, c := range desc.Caveats {
		pd.Log.Warn("fcsp pool: partitions may not hold here", "device", index, "why", c)
	}
	if err != nil {
		return nil, Description{}, errors.Join(err, d.Close())
	}
	return d, desc, nil
}

// Description is what a pool knows of its GPU. fcsp's DeviceInfo has the
// same fields (and documents them), so that each converts to the other.
type Description struct {
	Index             int
	Name              string
	UUID              string
	ComputeCapability string
	SMs               int    // from the driver's SM resource
	Granularity       int    // smallest SM group the driver cuts
	Alignment         int    // group sizes are multiples of this
	PartitionUnit     int    // set by the pool once it has cut the device (PartitionUnit)
	ThreadsPerSM      int    // resident threads per SM
	TotalMemory       uint64 // bytes
	DriverAPI         int    // cuDriverGetVersion
	Driver            string // which binding: libcuda.so.1 or the fake
	Simulated         bool
	WorkQueues        int      // CUDA_DEVICE_MAX_CONNECTIONS (WorkQueues)
	Caveats           []string // what keeps partitions from holding here (Caveats)
}

// Describe is device index's description from what d says of itself, and
// what the caller knows: whether the driver is the simulator, and the
// hardware work queues (WorkQueues).
func (d *Device) Describe(index int, simulated bool, queues int, caveats []string) (Description, error) {
	f, err := d.Facts()
	return Description{
		Index: index, Name: f.Name, UUID: f.UUID, ComputeCapability: f.ComputeCapability,
		SMs: d.SMs(), Granularity: d.Granularity(), Alignment: int(d.Info().CoscheduledAlignment),
		ThreadsPerSM: f.ThreadsPerSM, TotalMemory: f.TotalMemory, DriverAPI: d.APIVersion(), Driver: f.Driver,
		Simulated: simulated, WorkQueues: queues, Caveats: caveats,
	}, err
}

func (d Description) String() string {
	sim := ""
	if d.Simulated {
		sim = " [simulated]"
	}
	return fmt.Sprintf("GPU %d: %s%s, sm_%s, %d SMs (groups of %d), %.1f GiB, driver API %d",
		d.Index, d.Name, sim, d.ComputeCapability, d.SMs, d.Granularity, float64(d.TotalMemory)/(1<<30), d.DriverAPI)
}

// CutConfig is how a pool cuts its device.
type CutConfig struct {
	Unit    int    // group size in SMs; 0: the device's granularity
	Flags   uint32 // cuDevSmResourceSplitByCount flags (cuda.SplitIgnoreCoscheduling)
	Prewarm []int  // partitions to provision now, into Spare
	Spare   *Spares
	Log     *slog.Logger // hears what was cut
	Device  string       // the device as the log names it
}

// Cut cuts d in groups of cfg.Unit SMs and provisions cfg.Prewarm into
// cfg.Spare; ctx is checked before each partition. Where the driver will
// not split d's SMs in this process and nothing asked for partitions by
// name (no Unit, no Prewarm), split is nil and noSplit says why: the pool
// then serves unpartitioned tenants only.
func Cut(ctx context.Context, d *Device, cfg CutConfig) (split *Split, noSplit, err error) {
	unit := cfg.Unit
	if unit == 0 {
		unit = d.Granularity()
	}
	if unit > d.SMs() {
		return nil, nil, fmt.Errorf("%w: partition unit %d SMs; this device has %d SMs, cut in groups of %d", errs.ErrInvalidArgument, unit, d.SMs(), d.Granularity())
	}
	if split, err = d.SplitWith(unit, cfg.Flags); err != nil {
		if !errors.Is(err, cuda.ErrorInvalidResourceConfig) || cfg.Unit != 0 || len(cfg.Prewarm) > 0 {
			return nil, nil, fmt.Errorf("cutting the device into groups of %d SMs: %w", unit, err)
		}
		// The driver will not split this context's SMs (seen on the H200
		// in an MPS client with an active-thread percentage): the pool
		// still serves unpartitioned tenants, and a partition request
		// says why it cannot be had.
		noSplit = fmt.Errorf("%w: this device's SMs cannot be partitioned in this process (cutting into groups of %d SMs: %w); unpartitioned tenants work", cuda.ErrNotAvailable, unit, err)
		cfg.Log.Warn("fcsp pool open without partitions", "device", cfg.Device, "why", err)
		return nil, noSplit, nil
	}
	if split.GroupSMs() != unit {
		return nil, nil, fmt.Errorf("%w: partition unit %d SMs; this device splits in groups of %d (the driver rounded %d up to %d)",
			ErrGranularity, unit, d.Granularity(), unit, split.GroupSMs())
	}
	for _, s := range cfg.Prewarm {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		part, err := split.Take(s)
		if err != nil {
			return nil, nil, fmt.Errorf("prewarming a %d-SM partition: %w", s, err)
		}
		cfg.Spare.Add(part)
	}
	cfg.Log.Info("fcsp pool open", "device", cfg.Device, "unit", unit,
		"groups", split.Groups(), "leftover_sms", split.Remainder(), "prewarmed", cfg.Spare.Len())
	return split, nil, nil
}

// Ask is what a tenant asks of the split.
type Ask struct {
	SMs       int   // this many SMs (rounded to the split's groups)
	Rest      bool  // every SM free now (WithRestOfSMs)
	Remainder bool  // the split's leftover SMs
	Sizes     []int // the layouts of a reshapable partition, starting at SMs or Rest
	// Priority is a reshapable partition's streams' (cuGreenCtxStreamCreate's:
	// lower is greater, 0 the default; a latency class's is
	// cuda.StreamPriorityGreatest).
	Priority int
}

// TakeFor finds or builds a partition for a: the spare of its size that
// c claimed (Spares.Claim) where there is one, else one cut from s; for
// the rest of the SMs the claimed spares are closed first. It makes the
// driver calls, so the caller holds no lock of its own around it; the
// caller serialises the calls that take SMs (a pool's move lock,
// smmove Engine.move).
func (s *Split) TakeFor(c Claimed, a Ask) (*Partition, error) {
	switch {
	case len(a.Sizes) > 0 && a.Rest:
		_ = c.close()
		return s.TakeRestLayouts(a.Sizes)
	case len(a.Sizes) > 0 && a.SMs > 0:
		return s.TakeLayouts(a.SMs, a.Sizes, a.Priority)
	case len(a.Sizes) > 0:
		return nil, fmt.Errorf("%w: WithReshapeSizes needs a size to start at (WithSMs, WithSMShare or WithRestOfSMs)", errs.ErrInvalidArgument)
	case a.Remainder:
		return s.TakeRemainder()
	case a.Rest:
		_ = c.close() // first, so the rest really is everything free
		return s.TakeRest()
	}
	if c.one != nil {
		return c.one, nil
	}
	return s.Take(a.SMs)
}

// CheckWorkQueues refuses a partition, with errs.ErrFewWorkQueues, where
// the process has fewer than 2 hardware work queues (n): where every stream
// of the process shares one queue, a partition's isolation would be luck.
func CheckWorkQueues(n int) error {
	if n >= 2 {
		return nil
	}
	return fmt.Errorf("%w: CUDA_DEVICE_MAX_CONNECTIONS=%d puts every stream of this process on one hardware work queue, so another class's queued work holds up this partition's whatever its SMs "+
		"(on the H200: a 16-SM partition's P99 of 2.9-4.3 ms against 54-59 µs); unset it (the pool then asks for %d) or set it to 8 or more",
		errs.ErrFewWorkQueues, n, WorkQueuesWanted)
}

// RowFields is Row's shape: fcsp's SplitRow has it, so that TableOf gives
// the public rows without a conversion in fcsp.
type RowFields interface {
	~struct{ MinCount, Groups, GroupSMs, Remainder int }
}

// TableOf is d.Table with its rows as R.
func TableOf[R RowFields](d *Device, minCounts ...int) (predicted, measured []R, err error) {
	return TableOfWith[R](d, 0, minCounts...)
}

// TableOfWith is d.TableWith with its rows as R.
func TableOfWith[R RowFields](d *Device, flags uint32, minCounts ...int) (predicted, measured []R, err error) {
	pr, me, err := d.TableWith(flags, minCounts...)
	return rowsOf[R](pr), rowsOf[R](me), err
}

func rowsOf[R RowFields](rows []Row) []R {
	if rows == nil {
		return nil
	}
	out := make([]R, len(rows))
	for i, r := range rows {
		out[i] = R(r)
	}
	return out
}
