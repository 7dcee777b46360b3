package fcsp

import "fmt"

// shapeConfig is how a tenant asks for SMs beyond WithSMs and WithRestOfSMs.
type shapeConfig struct {
	share     float64 // WithSMShare; 0: not asked
	remainder bool    // WithRemainderSMs
	sizes     []int   // WithReshapeSizes
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
		cfg.sms = p.split.Nearest(cfg.shape.share, p.info.SMs)
		p.log.Info("SM share resolved", "share", cfg.shape.share, "sms", cfg.sms,
			"of", p.info.SMs, "unit", p.split.GroupSMs())
	}
	return nil
}

// SMShare is the fraction of the device's SMs the tenant holds (what
// WithSMShare picked, for one): 1 for an unpartitioned tenant, which shares
// all of them.
func (c *tenantCore) SMShare() float64 {
	return float64(c.SMs()) / float64(c.pool.info.SMs)
}
