package greenctx

import (
	"fmt"
	"sync"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// Split is one performed cut of the device into equal groups. Partitions
// taken from one Split are disjoint, and descriptors built from several of
// its groups are valid (the driver refuses groups of different splits).
type Split struct {
	dev      *Device
	minCount int
	groups   []cuda.DevResource
	rem      cuda.DevResource

	mu   sync.Mutex
	used []bool
}

// Split cuts the device at minCount.
func (d *Device) Split(minCount int) (*Split, error) {
	if minCount < 1 || minCount > d.SMs() {
		return nil, fmt.Errorf("greenctx: minimum count %d out of range: this device has %d SMs (ask for 1 to %d)", minCount, d.SMs(), d.SMs())
	}
	groups, rem, n, err := d.drv.DevSmResourceSplitByCount(d.res, 0, uint32(minCount), d.SMs())
	if err != nil {
		return nil, err
	}
	return &Split{dev: d, minCount: minCount, groups: groups[:n], rem: rem, used: make([]bool, n)}, nil
}

// GroupSMs is the size of each group (0 if the split made none).
func (s *Split) GroupSMs() int {
	if len(s.groups) == 0 {
		return 0
	}
	return int(s.groups[0].SMCount())
}

// Groups is how many groups the split made.
func (s *Split) Groups() int { return len(s.groups) }

// Remainder is how many SMs no group holds.
func (s *Split) Remainder() int { return int(s.rem.SMCount()) }

// FreeSMs is how many grouped SMs no partition holds.
func (s *Split) FreeSMs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.freeGroups() * s.GroupSMs()
}

func (s *Split) freeGroups() int {
	n := 0
	for _, u := range s.used {
		if !u {
			n++
		}
	}
	return n
}

// Check says whether a partition of sms SMs could be taken now, with an
// error that names the granularity or the shortfall if not.
func (s *Split) Check(sms int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.check(sms)
	return err
}

func (s *Split) check(sms int) (int, error) {
	g := s.GroupSMs()
	switch {
	case g == 0:
		return 0, fmt.Errorf("%w: the split made no groups", ErrInsufficientSMs)
	case sms <= 0:
		return 0, fmt.Errorf("%w: asked for %d SMs; ask for a positive multiple of %d", ErrGranularity, sms, g)
	case sms%g != 0:
		lo, hi := sms/g*g, (sms/g+1)*g
		if lo == 0 {
			return 0, fmt.Errorf("%w: asked for %d SMs; this device splits in groups of %d (try %d)", ErrGranularity, sms, g, hi)
		}
		return 0, fmt.Errorf("%w: asked for %d SMs; this device splits in groups of %d (try %d or %d)", ErrGranularity, sms, g, lo, hi)
	}
	need, free := sms/g, s.freeGroups()
	if need > free {
		return 0, fmt.Errorf("%w: asked for %d SMs; %d of %d partitionable SMs are free (groups of %d, %d SMs left over by the split)",
			ErrInsufficientSMs, sms, free*g, len(s.groups)*g, g, s.Remainder())
	}
	return need, nil
}

// Take builds a partition of sms SMs from free groups.
func (s *Split) Take(sms int) (*Partition, error) {
	s.mu.Lock()
	need, err := s.check(sms)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	idx := make([]int, 0, need)
	for i := range s.used {
		if len(idx) == need {
			break
		}
		if !s.used[i] {
			s.used[i] = true
			idx = append(idx, i)
		}
	}
	s.mu.Unlock()
	p, err := s.build(idx)
	if err != nil {
		s.give(idx)
		return nil, err
	}
	return p, nil
}

// TakeRest builds a partition of every free group.
func (s *Split) TakeRest() (*Partition, error) {
	s.mu.Lock()
	free := s.freeGroups()
	s.mu.Unlock()
	if free == 0 {
		return nil, fmt.Errorf("%w: no free groups left", ErrInsufficientSMs)
	}
	return s.Take(free * s.GroupSMs())
}

func (s *Split) give(idx []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, i := range idx {
		s.used[i] = false
	}
}

func (s *Split) build(idx []int) (*Partition, error) {
	res := make([]cuda.DevResource, len(idx))
	for i, j := range idx {
		res[i] = s.groups[j]
	}
	p, err := newPartition(s.dev, res)
	if err != nil {
		return nil, err
	}
	p.release = func() { s.give(idx) }
	return p, nil
}
