package fcsp

// resolveShape turns a share into an SM count. The caller holds p.mu.
func (p *Pool) resolveShape(cfg *tenantConfig) error {
	if cfg.Shape.Share > 0 {
		cfg.SMs = p.split.Nearest(cfg.Shape.Share, p.info.SMs)
		p.log.Info("SM share resolved", "share", cfg.Shape.Share, "sms", cfg.SMs,
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
