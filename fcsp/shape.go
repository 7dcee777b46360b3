package fcsp

// resolveShape turns a share into an SM count. The caller holds the
// pool's lock (tenancy.Config.Resolve).
func (p *Pool) resolveShape(cfg *tenantConfig) error {
	if cfg.Shape.Share > 0 {
		cfg.SMs = p.split.Nearest(cfg.Shape.Share, p.info.SMs)
		p.log.Info("SM share resolved", "share", cfg.Shape.Share, "sms", cfg.SMs,
			"of", p.info.SMs, "unit", p.split.GroupSMs())
	}
	return nil
}
