package config

import (
	"context"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/fcsp-go/fcsp-go/internal/smpart"
	"github.com/fcsp-go/fcsp-go/stream"
)

// Tenant is what NewTenant's options chose; Resolve checks them together
// and fills in what they imply.
type Tenant struct {
	SMs     int     // 0: no partition (shares the device)
	Rest    bool    // take every free group
	Quota   uint64  // 0: up to the device limit
	SMLimit float64 // 0: unlimited
	Class   stream.Class
	Ctx     context.Context
	Plain   bool   // WithoutMemoryPool: cuMemAlloc and cuMemFree
	Dos     int    // WithConcurrentDos; 0: smpart.DefaultSlots
	Keep    uint64 // the pool's release threshold
	NoLists bool   // the driver's pool alone, without free lists (benchmarks)

	Refill   time.Duration // WithTenantRefillPeriod; 0: the pool's
	Stall    time.Duration // WithTenantStallTimeout; 0: the pool's, NoStall: not watched
	Horizon  time.Duration // WithQueueHorizon; 0: the default, NoQueueHorizon: none
	GPUShare float64       // WithGPUShare; 0: none
	Metered  bool          // WithGPUMetering (or WithGPUShare)
	Clock    func() int64  // the limiter's clock (tests); nil: monotonic

	Shape Shape // WithSMShare, WithRemainderSMs, WithReshapeSizes

	Prio Prio // WithPriority, WithBandwidthFloor

	Latency Latency // WithLatencyTarget

	// Warm is WithWarmup's function, a func(fcsp.Current) error (this
	// package cannot name fcsp's types); nil: none.
	Warm any
}

// Latency is a latency class's target and the SMs it may hold
// (WithLatencyTarget): the pool's controller sizes it between Min and Max.
type Latency struct {
	Target   time.Duration
	Relative float64 // WithRelativeLatencyTarget: the target as a factor of the P99 at Max; Target 0
	Min, Max int
}

// SetLatency records WithLatencyTarget's arguments, checked.
func (c *Tenant) SetLatency(target time.Duration, min, max int) error {
	if target <= 0 || min <= 0 || max < min {
		return invalid("WithLatencyTarget(%v, %d, %d); want a positive target and 0 < minSMs <= maxSMs", target, min, max)
	}
	c.Latency = Latency{Target: target, Min: min, Max: max}
	return nil
}

// SetRelativeLatency records WithRelativeLatencyTarget's arguments,
// checked.
func (c *Tenant) SetRelativeLatency(factor float64, min, max int) error {
	if !(factor >= 1 && factor <= 1000) || min <= 0 || max < min {
		return invalid("WithRelativeLatencyTarget(%v, %d, %d); want a factor from 1 to 1000 and 0 < minSMs <= maxSMs", factor, min, max)
	}
	c.Latency = Latency{Relative: factor, Min: min, Max: max}
	return nil
}

// NoQueueHorizon is WithQueueHorizon's value for a rest tenant whose queue
// is never bounded.
const NoQueueHorizon time.Duration = -1

// SetQueueHorizon is WithQueueHorizon.
func (c *Tenant) SetQueueHorizon(d time.Duration) error {
	if d != NoQueueHorizon && d <= 0 {
		return invalid("queue horizon %v; want a positive duration, or fcsp.NoQueueHorizon", d)
	}
	c.Horizon = d
	return nil
}

// Shape is how a tenant asks for SMs beyond WithSMs and WithRestOfSMs.
type Shape struct {
	Share     float64 // WithSMShare; 0: not asked
	Remainder bool    // WithRemainderSMs
	Sizes     []int   // WithReshapeSizes
}

// Priority is fcsp.Priority's values: the rank for memory bandwidth.
type Priority int

const (
	Normal          Priority = iota // fcsp.Normal
	LatencyCritical                 // fcsp.LatencyCritical
)

func (p Priority) String() string {
	switch p {
	case Normal:
		return "normal"
	case LatencyCritical:
		return "latency-critical"
	}
	return fmt.Sprintf("Priority(%d)", int(p))
}

// Prio is what WithPriority and WithBandwidthFloor asked for.
type Prio struct {
	Prio  Priority
	Floor float64 // 0: none
}

// SetConcurrentDos is WithConcurrentDos.
func (c *Tenant) SetConcurrentDos(n int) error {
	if n < 1 || n > smpart.MaxSlots {
		return invalid("WithConcurrentDos(%d); want 1 to %d", n, smpart.MaxSlots)
	}
	c.Dos = n
	return nil
}

// SetContext is WithContext.
func (c *Tenant) SetContext(ctx context.Context) error {
	if ctx == nil {
		return invalid("WithContext of a nil context.Context; pass one (context.Background() for a tenant that lives until Close)")
	}
	c.Ctx = ctx
	return nil
}

// SetSMs is WithSMs. Whether n is a multiple of the partition unit is the
// split's to say (smpart.ErrGranularity), when the partition is taken.
func (c *Tenant) SetSMs(n int) error {
	if n <= 0 {
		return invalid("WithSMs(%d); want a positive multiple of the partition unit", n)
	}
	c.SMs = n
	return nil
}

// SetQuota is WithMemoryQuota.
func (c *Tenant) SetQuota(bytes uint64) error {
	if bytes == 0 {
		return invalid("memory quota 0; want a positive byte count")
	}
	c.Quota = bytes
	return nil
}

// SetSMLimit is WithSMLimit.
func (c *Tenant) SetSMLimit(f float64) error {
	if err := fraction("SM limit", f); err != nil {
		return err
	}
	c.SMLimit = f
	return nil
}

// SetClass is WithStreamClass.
func (c *Tenant) SetClass(cl stream.Class) error {
	if !cl.Valid() {
		return invalid("stream class %v", cl)
	}
	c.Class = cl
	return nil
}

// SetSMShare is WithSMShare.
func (c *Tenant) SetSMShare(f float64) error {
	if err := fraction("SM share", f); err != nil {
		return err
	}
	c.Shape.Share = f
	return nil
}

// SetPriority is WithPriority.
func (c *Tenant) SetPriority(p Priority) error {
	if p != Normal && p != LatencyCritical {
		return invalid("priority %v; want fcsp.Normal or fcsp.LatencyCritical", p)
	}
	c.Prio.Prio = p
	return nil
}

// SetFloor is WithBandwidthFloor.
func (c *Tenant) SetFloor(f float64) error {
	if err := fraction("bandwidth floor", f); err != nil {
		return err
	}
	c.Prio.Floor = f
	return nil
}

// AddReshapeSizes is WithReshapeSizes: the sizes add to those of earlier
// calls.
func (c *Tenant) AddReshapeSizes(sms []int) error {
	if len(sms) == 0 {
		return invalid("WithReshapeSizes with no sizes; give the SM counts the tenant may take")
	}
	if err := positive("reshape size", sms); err != nil {
		return err
	}
	c.Shape.Sizes = append(c.Shape.Sizes, sms...)
	return nil
}

// NoStall is WithTenantStallTimeout's value for a tenant never watched.
const NoStall time.Duration = -1

// SetStall is WithTenantStallTimeout.
func (c *Tenant) SetStall(d time.Duration) error {
	if d != NoStall && d < time.Millisecond {
		return invalid("stall timeout %v; want 1ms or more, or fcsp.NoStallTimeout", d)
	}
	c.Stall = d
	return nil
}

// SetRefill is WithTenantRefillPeriod.
func (c *Tenant) SetRefill(d time.Duration) error {
	if d <= 0 {
		return invalid("refill period %v; want a positive duration", d)
	}
	c.Refill = d
	return nil
}

// SetGPUShare is WithGPUShare, which implies metering.
func (c *Tenant) SetGPUShare(f float64) error {
	if err := fraction("GPU share", f); err != nil {
		return err
	}
	c.GPUShare, c.Metered = f, true
	return nil
}

// Partitioned reports whether the tenant asked for SMs of its own.
func (c *Tenant) Partitioned() bool {
	return c.SMs > 0 || c.Rest || c.Shape.Share > 0 || c.Shape.Remainder || c.Latency.Min > 0
}

// Resolve checks the tenant's name and its options together, then fills in
// what they imply: metering for a LatencyCritical tenant, a GPU-time
// bucket (a share of 1) for a floored one, and the node's SM limit.
// envLimit is CUDA_DEVICE_SM_LIMIT for the pool's device where envSet; it
// binds every kind of tenant: it is the launch-rate limit where none was
// asked for, and caps a GPU share (also the share 1 a bandwidth floor
// implies), which log reports.
func (c *Tenant) Resolve(name string, envLimit float64, envSet bool, log *slog.Logger) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := c.checkShape(); err != nil {
		return err
	}
	if err := c.checkPriority(); err != nil {
		return err
	}
	if c.GPUShare > 0 && c.SMLimit > 0 {
		return invalid("WithGPUShare and WithSMLimit together; choose one")
	}
	if envSet {
		switch {
		case c.GPUShare > envLimit:
			log.Info("GPU share bound by CUDA_DEVICE_SM_LIMIT", "tenant", name, "asked", c.GPUShare, "limit", envLimit)
			c.GPUShare = envLimit
		case c.GPUShare == 0 && (c.SMLimit == 0 || c.SMLimit > envLimit):
			c.SMLimit = envLimit
		}
	}
	return nil
}

// checkName refuses a tenant name that cannot be the tenant label of its
// metrics: Prometheus takes any UTF-8 there and nothing else, and one
// invalid label value fails a whole scrape, every tenant's series with it.
func checkName(name string) error {
	const allowed = "want a non-empty string of valid UTF-8 (it is the tenant label of the tenant's metrics)"
	switch {
	case name == "":
		return invalid("empty tenant name; %s", allowed)
	case !utf8.ValidString(name):
		return invalid("tenant name %q is not valid UTF-8; %s", name, allowed)
	}
	return nil
}

// checkShape refuses options that ask for SMs in two ways.
func (c *Tenant) checkShape() error {
	var asked []string
	if c.SMs > 0 {
		asked = append(asked, "WithSMs")
	}
	if c.Rest {
		asked = append(asked, "WithRestOfSMs")
	}
	if c.Shape.Share > 0 {
		asked = append(asked, "WithSMShare")
	}
	if c.Shape.Remainder {
		asked = append(asked, "WithRemainderSMs")
	}
	if c.Latency.Min > 0 {
		asked = append(asked, "WithLatencyTarget")
		if len(c.Shape.Sizes) > 0 {
			return invalid("WithLatencyTarget with WithReshapeSizes; the target's bounds give the sizes")
		}
	}
	if len(asked) > 1 {
		return invalid("%v together; choose one", asked)
	}
	if len(c.Shape.Sizes) > 0 && (len(asked) == 0 || c.Shape.Remainder) {
		return invalid("WithReshapeSizes needs a size to start at (WithSMs, WithSMShare or WithRestOfSMs)")
	}
	return nil
}

// checkPriority refuses contradictory priority options and turns on what
// they need: metering for a latency tenant, a GPU-time bucket for a
// floored one.
func (c *Tenant) checkPriority() error {
	switch {
	case c.Prio.Prio == LatencyCritical && c.Prio.Floor > 0:
		return invalid("WithBandwidthFloor on a LatencyCritical tenant; a floor is for the tenants that yield to it")
	case c.Prio.Floor > 0 && c.SMLimit > 0:
		return invalid("WithBandwidthFloor with WithSMLimit; a floor needs a GPU-time bucket: use WithGPUShare")
	}
	if c.Prio.Prio == LatencyCritical {
		c.Metered = true
	}
	if c.Prio.Floor > 0 && c.GPUShare == 0 {
		c.GPUShare, c.Metered = 1, true
	}
	return nil
}
