package smpart

import (
	"fmt"
	"math"
	"slices"
	"sync/atomic"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/lockorder"
)

// Split is one performed cut of the device into equal groups. Partitions
// taken from one Split are disjoint, and descriptors built from several of
// its groups are valid (the driver refuses groups of different splits).
type Split struct {
	// set once before sharing: the device and the cut.
	dev      *Device
	minCount int
	flags    uint32
	groups   []cuda.DevResource
	rem      cuda.DevResource

	mu      lockorder.Mutex[lockorder.Split] // protects the following fields
	used    []bool                           // guarded by mu; the group is part of a partition
	remUsed bool                             // guarded by mu; the remainder is part of a partition
	rest    []bool                           // guarded by mu; the group is held by a partition of the rest (WithRestOfSMs)
	remRest bool                             // guarded by mu; the remainder is, too

	version atomic.Uint64 // atomic; written under mu: counts the changes of used and remUsed (Version)
}

// Version counts the changes of which SMs partitions hold: a caller that
// saw one knows nothing moved while it is unchanged (0 for a nil Split).
func (s *Split) Version() uint64 {
	if s == nil {
		return 0
	}
	return s.version.Load()
}

// Split cuts the device at minCount, honouring SM co-scheduling.
func (d *Device) Split(minCount int) (*Split, error) { return d.SplitWith(minCount, 0) }

// SplitWith cuts the device at minCount with the driver's split flags
// (cuda.SplitIgnoreCoscheduling: more groups, see fcsp.WithoutCoscheduling).
func (d *Device) SplitWith(minCount int, flags uint32) (*Split, error) {
	if err := d.checkMinCount(minCount); err != nil {
		return nil, err
	}
	groups, rem, n, err := d.drv.DevSmResourceSplitByCount(d.res, flags, uint32(minCount), d.SMs())
	if err != nil {
		return nil, err
	}
	return &Split{dev: d, minCount: minCount, flags: flags, groups: groups[:n], rem: rem, used: make([]bool, n), rest: make([]bool, n)}, nil
}

// checkMinCount refuses, with errs.ErrInvalidArgument, a minimum count
// the driver cannot cut at.
func (d *Device) checkMinCount(minCount int) error {
	if minCount < 1 || minCount > d.SMs() {
		return fmt.Errorf("%w: minimum count %d; this device has %d SMs (ask for 1 to %d)", errs.ErrInvalidArgument, minCount, d.SMs(), d.SMs())
	}
	return nil
}

// Flags are the split flags the cut was made with.
func (s *Split) Flags() uint32 { return s.flags }

// GroupSMs is the size of each group (0 if the split made none, or is nil:
// a device a pool could not split).
func (s *Split) GroupSMs() int {
	if s == nil || len(s.groups) == 0 {
		return 0
	}
	return int(s.groups[0].SMCount())
}

// Groups is how many groups the split made.
func (s *Split) Groups() int { return len(s.groups) }

// Nearest is the partition size nearest the fraction f of the device's
// deviceSMs that the split can give: whole groups, at least one.
func (s *Split) Nearest(f float64, deviceSMs int) int {
	unit := s.GroupSMs()
	n := int(math.Round(f * float64(deviceSMs) / float64(unit)))
	return min(max(n, 1), s.Groups()) * unit
}

// Remainder is how many SMs no group holds.
func (s *Split) Remainder() int { return int(s.rem.SMCount()) }

// FreeSMs is how many SMs no partition holds: free groups, and the
// remainder while no partition includes it. A nil Split has none.
func (s *Split) FreeSMs() int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.freeGroups() * s.GroupSMs()
	if !s.remUsed {
		n += s.Remainder()
	}
	return n
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
			s.version.Add(1)
			idx = append(idx, i)
		}
	}
	s.mu.Unlock()
	p, err := s.build(idx, false)
	if err != nil {
		s.give(idx, false)
		return nil, err
	}
	return p, nil
}

// TakeRest builds a partition of every free group and, while no other
// partition holds it, the split's remainder: the driver builds a green
// context from groups and the remaining resource together (116 SMs on the
// H200: 13 groups of 8 and the 12 SMs a split by 8 leaves over).
func (s *Split) TakeRest() (*Partition, error) {
	idx, rem := s.claimRest()
	if len(idx) == 0 && !rem {
		return nil, fmt.Errorf("%w: no free groups left and the split's remainder is taken", ErrInsufficientSMs)
	}
	p, err := s.build(idx, rem)
	if err != nil {
		s.give(idx, rem)
		return nil, err
	}
	p.rest = true
	return p, nil
}

// TakeRemainder builds a partition of the split's remainder alone: the SMs
// no group holds (12 on the H200 split by 8).
func (s *Split) TakeRemainder() (*Partition, error) {
	s.mu.Lock()
	switch {
	case s.Remainder() == 0:
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: this split (groups of %d) leaves no SMs over", ErrInsufficientSMs, s.GroupSMs())
	case s.remUsed:
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: the split's remainder of %d SMs is already part of a partition", ErrInsufficientSMs, s.Remainder())
	}
	s.remUsed = true
	s.version.Add(1)
	s.mu.Unlock()
	p, err := s.build(nil, true)
	if err != nil {
		s.give(nil, true)
		return nil, err
	}
	return p, nil
}

func (s *Split) give(idx []int, rem bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, i := range idx {
		s.used[i], s.rest[i] = false, false
		s.version.Add(1)
	}
	if rem {
		s.remUsed, s.remRest = false, false
		s.version.Add(1)
	}
}

// Commons says which SMs a pool's unpartitioned tenants run on now: every
// SM while no partition holds any (whole); else the free groups and the
// remainder while free; else, where a partition took the rest
// (WithRestOfSMs), that partition's SMs, which they then share with it
// (shared); else none (no groups, no rem). A partition of a size asked
// for (WithSMs) is never among them.
func (s *Split) Commons() (idx []int, rem, whole, shared bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.used, true) && !s.remUsed {
		return nil, false, true, false
	}
	for i, u := range s.used {
		if !u {
			idx = append(idx, i)
		}
	}
	rem = !s.remUsed && s.Remainder() > 0
	if len(idx) > 0 || rem {
		return idx, rem, false, false
	}
	for i, r := range s.rest {
		if r {
			idx = append(idx, i)
		}
	}
	rem = s.remRest
	return idx, rem, false, len(idx) > 0 || rem
}

// Resources lists the groups idx and, if rem, the remainder, as one
// descriptor's input.
func (s *Split) Resources(idx []int, rem bool) SMSet { return s.resources(idx, rem) }

func (s *Split) resources(idx []int, rem bool) SMSet {
	res := make([]cuda.DevResource, 0, len(idx)+1)
	for _, j := range idx {
		res = append(res, s.groups[j])
	}
	if rem {
		res = append(res, s.rem)
	}
	return SMSet{res: res, key: s.greenKey(idx, rem), idx: slices.Sorted(slices.Values(idx)), rem: rem}
}

func (s *Split) build(idx []int, rem bool) (*Partition, error) {
	p, err := newPartition(s.dev, s.resources(idx, rem))
	if err != nil {
		return nil, err
	}
	p.release = func() { s.give(idx, rem) }
	return p, nil
}

// claimRest marks every free group, and the remainder if free, as the rest
// tenant's, and returns those groups in increasing order and whether it
// took the remainder.
func (s *Split) claimRest() (idx []int, rem bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, u := range s.used {
		if !u {
			s.used[i], s.rest[i] = true, true
			s.version.Add(1)
			idx = append(idx, i)
		}
	}
	rem = !s.remUsed && s.Remainder() > 0
	s.remUsed = s.remUsed || rem
	s.remRest = s.remRest || rem
	s.version.Add(1)
	return idx, rem
}
