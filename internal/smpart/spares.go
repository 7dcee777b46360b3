package smpart

import "errors"

// Spares are partitions provisioned ahead of the tenants that will own
// them (fcsp.WithPrewarm), and those tenants' partitions kept for the next
// tenant of their size once they close: a tenant of a spare's size skips
// green-context creation. It is not safe for concurrent use: its owner
// holds its lock around every call.
type Spares struct {
	want []int // the sizes to keep, one entry per partition
	have []*Partition
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
