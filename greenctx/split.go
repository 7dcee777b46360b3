package greenctx

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// Split is one cut of the device into equal groups of SMs. Partitions taken
// from it are made of whole groups and never share an SM. Close closes them.
type Split struct {
	dev *Device
	s   *smpart.Split

	life   sync.RWMutex // read: a Take in flight; write: Close
	closed bool
	mu     sync.Mutex // parts
	parts  map[*Partition]struct{}
}

// GroupSMs is the number of SMs in each group (0 if the cut made none).
func (s *Split) GroupSMs() int { return s.s.GroupSMs() }

// Groups is how many groups the cut made.
func (s *Split) Groups() int { return s.s.Groups() }

// Remainder is how many SMs no group holds (12 on the H200 cut by 8).
func (s *Split) Remainder() int { return s.s.Remainder() }

// FreeSMs is how many SMs no partition of this split holds: the free
// groups, and the remainder while no partition includes it.
func (s *Split) FreeSMs() int { return s.s.FreeSMs() }

// Check says whether a partition of sms SMs could be taken now; if not, the
// error (ErrGranularity or ErrInsufficientSMs) names the group size or the
// shortfall.
func (s *Split) Check(sms int) error { return s.s.Check(sms) }

func (s *Split) String() string {
	return fmt.Sprintf("split into %d groups of %d SMs, %d left over", s.Groups(), s.GroupSMs(), s.Remainder())
}

// take admits a call, builds a partition with build and records it.
func (s *Split) take(build func() (*smpart.Partition, error)) (*Partition, error) {
	if err := s.dev.enter(); err != nil {
		return nil, err
	}
	defer s.dev.exit()
	s.life.RLock()
	defer s.life.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	p, err := build()
	if err != nil {
		return nil, err
	}
	part := &Partition{split: s, p: p}
	s.mu.Lock()
	s.parts[part] = struct{}{}
	s.mu.Unlock()
	return part, nil
}

// Take builds a partition of sms SMs, a whole number of free groups
// (ErrGranularity otherwise, naming the nearest legal counts;
// ErrInsufficientSMs when too few groups are free).
func (s *Split) Take(sms int) (*Partition, error) {
	return s.take(func() (*smpart.Partition, error) { return s.s.Take(sms) })
}

// TakeRest builds a partition of every free group and, while no other
// partition holds it, the cut's remainder: the driver builds one green
// context from both (116 SMs on the H200 cut by 8 beside a 16-SM
// partition: 13 groups of 8 and the 12 SMs left over).
func (s *Split) TakeRest() (*Partition, error) {
	return s.take(s.s.TakeRest)
}

// TakeRemainder builds a partition of the cut's remainder alone, the SMs no
// group holds; ErrInsufficientSMs if there are none or a partition holds
// them already.
func (s *Split) TakeRemainder() (*Partition, error) {
	return s.take(s.s.TakeRemainder)
}

// Close closes every partition taken from the split, waiting for their
// streams; afterwards Take returns ErrClosed. It is idempotent.
func (s *Split) Close() error { return s.close(true) }

func (s *Split) close(forget bool) error {
	s.life.Lock()
	defer s.life.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.mu.Lock()
	parts := s.parts
	s.parts = nil
	s.mu.Unlock()
	var errList []error
	for p := range parts {
		errList = append(errList, p.close())
	}
	if forget { // not when the device closes it: the device holds its lock
		s.dev.mu.Lock()
		delete(s.dev.splits, s)
		s.dev.mu.Unlock()
	}
	return errors.Join(errList...)
}

// Partition is a green context over a set of SMs with one non-blocking
// stream of its own.
type Partition struct {
	split  *Split
	p      *smpart.Partition
	closed atomic.Bool
}

// SMs is how many SMs the driver says the partition's green context holds
// (read back from the driver, not the number asked for).
func (p *Partition) SMs() int { return p.p.SMs() }

// Context is the partition's CUcontext (cuCtxFromGreenCtx), for another
// binding; 0 once the partition is closed. The driver lets it be current on
// one OS thread at a time and does not lock it: see the package
// documentation.
func (p *Partition) Context() uintptr {
	if p.closed.Load() {
		return 0
	}
	return uintptr(p.p.Context())
}

// Stream is the partition's non-blocking CUstream; work queued on it runs on
// the partition's SMs only. 0 once the partition is closed. Close waits for
// the work queued on it, then destroys it.
func (p *Partition) Stream() uintptr {
	if p.closed.Load() {
		return 0
	}
	return uintptr(p.p.Stream())
}

func (p *Partition) String() string { return p.p.String() }

// Close waits for the partition's stream, destroys it and the green context,
// and gives the SMs back to the split. It is idempotent.
func (p *Partition) Close() error {
	err := p.close()
	s := p.split
	s.mu.Lock()
	delete(s.parts, p) // s.parts is nil once the split has closed: a no-op
	s.mu.Unlock()
	return err
}

func (p *Partition) close() error {
	p.closed.Store(true)
	// The internal partition's Close is idempotent and serialised: a second
	// caller waits for the first to finish, so a split or device closing
	// this partition never releases the device under its destruction.
	return p.p.Close()
}
