package tokenbucket

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/stream"
)

// Defaults applied to zero-valued Config fields.
const (
	DefaultTokenFactor  = 1.0
	DefaultRefillPeriod = time.Millisecond
	DefaultDampening    = 0.9
	DefaultPenalty      = 1.0
)

// NoDebt, as Config.MaxDebt, allows no debt past an empty bucket.
const NoDebt = -1.0

// NoPenalty, as Config.Penalty, disables the throttle penalty (the zero
// value selects DefaultPenalty).
const NoPenalty = -1.0

// Config sizes a Limiter. Zero values of TokenFactor, RefillPeriod,
// Dampening, Penalty and Clock select their defaults; SMs, ThreadsPerSM and
// SMLimit have none.
type Config struct {
	// SMs is the number of SMs the limiter governs (> 0): the whole device
	// (132 on an H200) or a tenant's partition.
	SMs int
	// ThreadsPerSM is the resident-thread limit of one SM (> 0; 2048 on
	// Hopper).
	ThreadsPerSM int
	// TokenFactor scales capacity: the device bucket holds
	// SMs*ThreadsPerSM*TokenFactor tokens. Finite, > 0; default 1.
	TokenFactor float64
	// SMLimit is the fraction of the device the tenant may use, in (0, 1].
	// The device bucket refills Capacity*SMLimit tokens per RefillPeriod.
	SMLimit float64
	// RefillPeriod is the time in which a bucket limited to 100% refills
	// its whole capacity (> 0; default 1 ms).
	RefillPeriod time.Duration
	// Dampening multiplies a launch's thread count to get its base cost, in
	// (0, 1]; default 0.9. Below 1 it credits that a launch rarely keeps all
	// its threads resident for the whole refill period.
	Dampening float64
	// Penalty weighs the throttle penalty: a throttled (non-NCCL) launch
	// costs base*(1 + Penalty*(1-SMLimit)), so a tenant held well below the
	// whole device pays more per thread. Finite, >= 0; 0 selects the default
	// 1; NoPenalty disables it.
	Penalty float64
	// MaxDebt is how many refill periods into debt one launch may put a
	// bucket (finite, >= 0; 0 selects 1; NoDebt allows none). A launch
	// costing more is charged over time: see Bucket.
	MaxDebt float64
	// Clock returns monotonic nanoseconds; nil selects the default
	// monotonic clock. Inject one for deterministic tests.
	Clock func() int64
}

// withDefaults validates cfg and fills its defaults. All problems are
// reported at once, each naming the field, its value and what is allowed.
func (cfg Config) withDefaults() (Config, error) {
	var errs []error
	if cfg.SMs <= 0 {
		errs = append(errs, invalid("SMs", cfg.SMs, "> 0 (e.g. 132 for an H200)"))
	}
	if cfg.ThreadsPerSM <= 0 {
		errs = append(errs, invalid("ThreadsPerSM", cfg.ThreadsPerSM, "> 0 (2048 on Hopper)"))
	}
	if cfg.TokenFactor == 0 {
		cfg.TokenFactor = DefaultTokenFactor
	} else if !(cfg.TokenFactor > 0) || math.IsInf(cfg.TokenFactor, 0) {
		errs = append(errs, invalid("TokenFactor", cfg.TokenFactor, "finite and > 0 (0 selects 1)"))
	}
	if err := checkSMLimit(cfg.SMLimit); err != nil {
		errs = append(errs, err)
	}
	if cfg.RefillPeriod == 0 {
		cfg.RefillPeriod = DefaultRefillPeriod
	} else if cfg.RefillPeriod < 0 {
		errs = append(errs, invalid("RefillPeriod", cfg.RefillPeriod, "> 0 (0 selects 1ms)"))
	}
	if cfg.Dampening == 0 {
		cfg.Dampening = DefaultDampening
	} else if !(cfg.Dampening > 0 && cfg.Dampening <= 1) {
		errs = append(errs, invalid("Dampening", cfg.Dampening, "in (0, 1] (0 selects 0.9)"))
	}
	switch {
	case cfg.Penalty == 0:
		cfg.Penalty = DefaultPenalty
	case cfg.Penalty == NoPenalty:
		cfg.Penalty = 0
	case !(cfg.Penalty > 0) || math.IsInf(cfg.Penalty, 0):
		errs = append(errs, invalid("Penalty", cfg.Penalty, "finite and >= 0 (0 selects 1; NoPenalty disables)"))
	}
	switch {
	case cfg.MaxDebt == 0:
		cfg.MaxDebt = 1
	case cfg.MaxDebt == NoDebt:
		cfg.MaxDebt = 0
	case !(cfg.MaxDebt > 0) || math.IsInf(cfg.MaxDebt, 0):
		errs = append(errs, invalid("MaxDebt", cfg.MaxDebt, "finite and >= 0 refill periods (0 selects 1; NoDebt allows none)"))
	}
	if len(errs) == 0 {
		if c := cfg.capacity(); !(c > 0) || math.IsInf(c, 0) {
			errs = append(errs, invalid("SMs*ThreadsPerSM*TokenFactor", c, "finite and > 0"))
		}
	}
	if cfg.Clock == nil {
		cfg.Clock = monotonic
	}
	return cfg, errors.Join(errs...)
}

// clock reads the limiter's clock. The default one is called directly, not
// through the func value: an indirect call cannot be inlined, and this is
// on every launch (issue 19).
func (l *Limiter) clock() int64 {
	if l.mono {
		return monotonic()
	}
	return l.cfg.Clock()
}

func checkSMLimit(f float64) error {
	if !(f > 0 && f <= 1) {
		return invalid("SMLimit", f, "a fraction in (0, 1] (1 = the whole device)")
	}
	return nil
}

func (cfg Config) capacity() float64 {
	return float64(cfg.SMs) * float64(cfg.ThreadsPerSM) * cfg.TokenFactor
}

// Limiter is the two-tier launch limiter of one GPU: a device bucket shared
// by every stream, and a bucket per stream holding a share of it.
type Limiter struct {
	cfg      Config        // with defaults; SMLimit and SMs are the initial ones
	capacity atomic.Uint64 // float64 bits; SetSMs changes it
	device   *Bucket
	mono     bool // cfg.Clock is the default: call it directly (see clock)
	ls       leases

	// Read on every launch, written by SetSMLimit: float64 bits.
	smLimit atomic.Uint64
	factor  atomic.Uint64 // Dampening * (1 + Penalty*(1-SMLimit))

	mu      sync.Mutex // guards streams and serialises SetSMLimit
	streams map[*Stream]struct{}
	// wake is closed (and replaced) when waiters must evaluate again: a
	// new rate, or a stream closed.
	wake atomic.Pointer[chan struct{}]
}

// kick wakes every waiter of the limiter. Called with mu held.
func (l *Limiter) kick() {
	c := make(chan struct{})
	close(*l.wake.Swap(&c))
}

func (l *Limiter) maxDebt() time.Duration {
	return time.Duration(float64(l.cfg.RefillPeriod) * l.cfg.MaxDebt)
}

// Close closes every stream of the limiter, waking their waiters with
// ErrClosed. Idempotent; it always returns nil.
func (l *Limiter) Close() error {
	l.mu.Lock()
	streams := l.streams
	l.streams = map[*Stream]struct{}{}
	for s := range streams {
		s.closed.Store(true)
	}
	l.kick()
	l.mu.Unlock()
	l.returnLease()
	return nil
}

// New returns a Limiter with full buckets. An invalid cfg yields an error
// matching ErrInvalidConfig that lists every bad field.
func New(cfg Config) (*Limiter, error) {
	mono := cfg.Clock == nil
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	l := &Limiter{
		cfg:     cfg,
		mono:    mono,
		streams: make(map[*Stream]struct{}),
	}
	c := make(chan struct{})
	l.wake.Store(&c)
	l.capacity.Store(math.Float64bits(cfg.capacity()))
	l.device, err = NewBucket(l.rateFor(l.Capacity(), cfg.SMLimit), l.Capacity(), WithClock(cfg.Clock), WithMaxDebt(l.maxDebt()))
	if err != nil {
		return nil, err // unreachable: cfg was validated
	}
	l.storeLimit(cfg.SMLimit)
	return l, nil
}

// rateFor is the device refill rate, in tokens per second, of a bucket of
// capacity tokens under SM limit f.
func (l *Limiter) rateFor(capacity, f float64) float64 {
	return capacity * f / l.cfg.RefillPeriod.Seconds()
}

func (l *Limiter) storeLimit(f float64) {
	l.smLimit.Store(math.Float64bits(f))
	l.factor.Store(math.Float64bits(l.cfg.Dampening * (1 + l.cfg.Penalty*(1-f))))
}

// Capacity returns the device bucket's size in tokens.
func (l *Limiter) Capacity() float64 { return math.Float64frombits(l.capacity.Load()) }

// Rate returns the device bucket's refill rate in tokens per second.
func (l *Limiter) Rate() float64 { return l.device.Rate() }

// SMLimit returns the current SM limit.
func (l *Limiter) SMLimit() float64 { return math.Float64frombits(l.smLimit.Load()) }

// SetSMLimit changes the SM limit: the refill rate of the device bucket and
// of every open stream's bucket, and the throttle penalty. The new rate
// governs from each bucket's next acquire, and waiters are woken to
// re-reserve under it (a Waiting's are refused with ErrLimitChanged, to be
// priced again).
//
// The tokens in hand in each bucket are multiplied by new/old limit
// (capped at its size; debt, work already admitted, is kept), so that they
// stand for the same saving in refill periods at the new limit as at the
// old. Kept unscaled, a full bucket lowered from limit 1 to f would let a
// tenant running flat out go on at the old rate for 1/(1-f) refill periods
// (1.33 at f = 0.25); scaled, it meets the new limit within f/(1-f) (0.33).
func (l *Limiter) SetSMLimit(f float64) error {
	if err := checkSMLimit(f); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	rate, scale := l.rateFor(l.Capacity(), f), f/l.SMLimit()
	// A lease's unused tokens are tokens in hand: back into the device
	// bucket before the change scales them, and no new lease until the
	// change is done (see lease).
	l.ls.mu.Lock()
	defer l.ls.mu.Unlock()
	l.revokeLocked()
	if err := l.device.setRate(rate, scale); err != nil {
		return err
	}
	for s := range l.streams {
		if err := s.bucket.setRate(rate*s.share, scale); err != nil {
			return err
		}
	}
	l.storeLimit(f)
	l.kick() // waiters re-reserve under the new rate
	return nil
}

// SetSMs resizes the limiter for n SMs (a tenant's partition that grew or
// shrank): the device bucket holds n*ThreadsPerSM*TokenFactor tokens and
// refills at the current SM limit of that, each stream's bucket its share
// of both. Each bucket keeps its fill (tokens in hand scaled by new/old
// size; debt, work already admitted, is kept), and waiters are woken to
// re-reserve under the new size. n must be > 0.
func (l *Limiter) SetSMs(n int) error {
	if n <= 0 {
		return invalid("SMs", n, "> 0")
	}
	cfg := l.cfg
	cfg.SMs = n
	capacity := cfg.capacity()
	if !(capacity > 0) || math.IsInf(capacity, 0) {
		return invalid("SMs*ThreadsPerSM*TokenFactor", capacity, "finite and > 0")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	scale := capacity / l.Capacity()
	// As SetSMLimit: the lease's tokens back first, no new lease meanwhile.
	l.ls.mu.Lock()
	defer l.ls.mu.Unlock()
	l.revokeLocked()
	rate := l.rateFor(capacity, l.SMLimit())
	if err := l.device.setRateBurst(rate, capacity, scale); err != nil {
		return err
	}
	for s := range l.streams {
		if err := s.bucket.setRateBurst(rate*s.share, capacity*s.share, scale); err != nil {
			return err
		}
	}
	l.capacity.Store(math.Float64bits(capacity))
	l.kick()
	return nil
}

// Cost returns the tokens one launch of grid×block threads is charged on a
// stream of class c:
//
//	threads * Dampening * (1 + Penalty*(1-SMLimit)) * c.ThrottleScale()
//
// where threads is the product of all six dimensions. It is 0 for classes
// that bypass the limiter (NCCL) and for a launch with a zero dimension.
func (l *Limiter) Cost(grid, block [3]uint32, c stream.Class) float64 {
	// float64 products: six uint32 factors can overflow any integer type.
	threads := float64(grid[0]) * float64(grid[1]) * float64(grid[2]) *
		float64(block[0]) * float64(block[1]) * float64(block[2])
	return l.ThreadsCost(threads, c)
}

// ThreadsCost is Cost for launches of threads threads in all: a launch's
// grid×block, or a graph's kernels' summed. A caller that counts the
// threads itself prices with a float64 rather than two arrays.
func (l *Limiter) ThreadsCost(threads float64, c stream.Class) float64 {
	if c.Bypass() {
		return 0
	}
	return threads * math.Float64frombits(l.factor.Load()) * c.ThrottleScale()
}
