package greenctx

// TryHoldUnnamed takes the partition's exclusion at once if it is free,
// for a caller that learns its OS thread id only afterwards (Tenant.Do
// learns it from the cgo call that makes the context current). That caller
// must name its thread with NameHolder before anything on this partition
// runs from that thread, and gives the exclusion back with Release, as
// after Hold. false, nil: the exclusion is taken (by another thread, or by
// this one, where Hold nests): call Hold. ErrClosed if the partition is
// closed.
func (p *Partition) TryHoldUnnamed() (bool, error) {
	if !p.mu.mu.TryLock() {
		return false, nil
	}
	if p.closed {
		p.mu.mu.Unlock()
		return false, ErrClosed
	}
	return true, nil
}

// NameHolder names thread as the holder of an exclusion taken by
// TryHoldUnnamed: from then on this partition's calls made on that thread
// nest, as under Hold.
func (p *Partition) NameHolder(thread int) { p.mu.holder.Store(int64(thread)) }
