package fcsp

import (
	"fmt"
	"math"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// shapeConfig is how a tenant asks for SMs beyond WithSMs and WithRestOfSMs.
type shapeConfig struct {
	share     float64 // WithSMShare; 0: not asked
	remainder bool    // WithRemainderSMs
	sizes     []int   // WithReshapeSizes
}

// WithoutCoscheduling cuts the device with
// CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING, which reaches more of the
// device: on the H200 a split by 8 makes 16 groups of 8 and leaves 4 SMs
// instead of 15 groups and 12. The cost: the driver no longer promises that
// a group's SMs can be co-scheduled, so a kernel launched with thread-block
// clusters may not fit in a partition (or may run fewer clusters at once);
// ordinary kernels are unaffected. See docs/BENCHMARKS.md for what was
// measured on the H200 (TestGPUWithoutCoscheduling).
func WithoutCoscheduling() Option {
	return func(c *poolConfig) error { c.splitFlag |= cuda.SplitIgnoreCoscheduling; return nil }
}

// WithSMShare gives the tenant a partition of about fraction f of the
// device's SMs (0 < f <= 1): the legal size nearest f x SMs, a whole number
// of partition units between one unit and every group the split made. The
// tenant's SMs and SMShare say what was picked, and the pool logs it.
func WithSMShare(f float64) TenantOption {
	return func(c *tenantConfig) error {
		if math.IsNaN(f) || f <= 0 || f > 1 {
			return fmt.Errorf("%w: SM share %v; want a fraction in (0, 1]", ErrInvalidArgument, f)
		}
		c.shape.share = f
		return nil
	}
}

// WithRemainderSMs gives the tenant the SMs that the pool's split leaves
// over, which no group holds (12 on the H200 split by 8; 4 with
// WithoutCoscheduling): small, but otherwise idle. A WithRestOfSMs tenant
// made while the remainder is free includes it.
func WithRemainderSMs() TenantOption {
	return func(c *tenantConfig) error { c.shape.remainder = true; return nil }
}

// checkShape refuses options that ask for SMs in two ways.
func (c *tenantConfig) checkShape() error {
	var asked []string
	if c.sms > 0 {
		asked = append(asked, "WithSMs")
	}
	if c.rest {
		asked = append(asked, "WithRestOfSMs")
	}
	if c.shape.share > 0 {
		asked = append(asked, "WithSMShare")
	}
	if c.shape.remainder {
		asked = append(asked, "WithRemainderSMs")
	}
	if len(asked) > 1 {
		return fmt.Errorf("%w: %v together; choose one", ErrInvalidArgument, asked)
	}
	if len(c.shape.sizes) > 0 && (len(asked) == 0 || c.shape.remainder) {
		return fmt.Errorf("%w: WithReshapeSizes needs a size to start at (WithSMs, WithSMShare or WithRestOfSMs)", ErrInvalidArgument)
	}
	return nil
}

// partitioned reports whether the tenant asked for SMs of its own.
func (c *tenantConfig) partitioned() bool {
	return c.sms > 0 || c.rest || c.shape.share > 0 || c.shape.remainder
}

// resolveShape turns a share into an SM count. The caller holds p.mu.
func (p *Pool) resolveShape(cfg *tenantConfig) error {
	if cfg.shape.share > 0 {
		cfg.sms = p.nearestSMs(cfg.shape.share)
		p.log.Info("SM share resolved", "share", cfg.shape.share, "sms", cfg.sms,
			"of", p.info.SMs, "unit", p.split.GroupSMs())
	}
	return nil
}

// nearestSMs is the legal partition size nearest f of the device's SMs.
func (p *Pool) nearestSMs(f float64) int {
	unit := p.split.GroupSMs()
	n := int(math.Round(f * float64(p.info.SMs) / float64(unit)))
	return min(max(n, 1), p.split.Groups()) * unit
}

// SMShare is the fraction of the device's SMs the tenant holds (what
// WithSMShare picked, for one): 1 for an unpartitioned tenant, which shares
// all of them.
func (c *tenantCore) SMShare() float64 {
	return float64(c.SMs()) / float64(c.pool.info.SMs)
}
