package smpart

import "errors"

// Spares are partitions provisioned ahead of the tenants that will own
// them (fcsp.WithPrewarm), and those tenants' partitions kept for the next
// tenant of their size once they close: a tenant of a spare's size skips
// green-context creation. It is not safe for concurrent use: its owner
// holds its lock around every call.
type Spares struct {
	want []int        // guarded by tenancy Roster.mu (its owner's lock); the sizes to keep, one entry per partition
	have []*Partition // guarded by tenancy Roster.mu (its owner's lock)
}

// NewSpares keeps up to one partition per entry of want (sizes in SMs).
func NewSpares(want []int) *Spares { return &Spares{want: want} }

// Add keeps p.
func (s *Spares) Add(p *Partition) { s.have = append(s.have, p) }

// Len is how many partitions are kept.
func (s *Spares) Len() int { return len(s.have) }

// SMs is how many SMs the kept partitions hold.
func (s *Spares) SMs() (n int) {
	for _, p := range s.have {
		n += p.SMs()
	}
	return n
}

// Take gives a kept partition of sms SMs away, or nil where none is kept.
func (s *Spares) Take(sms int) *Partition {
	for i, p := range s.have {
		if p.SMs() == sms {
			s.have = append(s.have[:i], s.have[i+1:]...)
			return p
		}
	}
	return nil
}

// Wants reports whether a partition of sms SMs should be kept: while fewer
// are kept of that size than were asked for.
func (s *Spares) Wants(sms int) bool {
	want, have := 0, 0
	for _, n := range s.want {
		if n == sms {
			want++
		}
	}
	for _, p := range s.have {
		if p.SMs() == sms {
			have++
		}
	}
	return have < want
}

// Claimed is what Spares.Claim took out for one Split.TakeFor: a kept
// partition of the size asked for (one), or every kept partition (all,
// for the rest of the SMs). The zero Claimed holds nothing. It is a value,
// and making one allocates nothing: a server makes and closes tenants at a
// high rate.
type Claimed struct {
	one *Partition
	all []*Partition
}

// Len is how many partitions c holds.
func (c Claimed) Len() int {
	if c.one != nil {
		return 1
	}
	return len(c.all)
}

// close closes what c holds.
func (c Claimed) close() error {
	errs := make([]error, 0, len(c.all)+1)
	if c.one != nil {
		errs = append(errs, c.one.Close())
	}
	for _, p := range c.all {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}

// Claim takes out of s what Split.TakeFor will use for a, so that its
// owner can build the partition without holding the lock it keeps s
// under (building makes driver calls): the kept partition of the size
// asked for, or, for the rest of the SMs, every kept partition (TakeFor
// closes them first, so that the rest really is every SM free); nothing
// for a reshapable partition or the remainder, which are always built.
// The claim is the caller's to pass to TakeFor, which uses or closes what
// it holds.
func (s *Spares) Claim(a Ask) Claimed {
	switch {
	case a.Rest:
		all := s.have
		s.have = nil
		return Claimed{all: all}
	case len(a.Sizes) > 0, a.Remainder:
		return Claimed{}
	}
	return Claimed{one: s.Take(a.SMs)}
}

// Close closes every kept partition (giving their SMs back to the split);
// the Spares stay usable, empty.
func (s *Spares) Close() error {
	var errs []error
	for _, p := range s.have {
		errs = append(errs, p.Close())
	}
	s.have = nil
	return errors.Join(errs...)
}
