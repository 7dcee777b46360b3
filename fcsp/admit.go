package fcsp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fcsp-go/fcsp-go/tokenbucket"
)

// launchCost is what a launch of grid x block costs on s, in tokens.
func (s *Stream) launchCost(grid, block Dim3) float64 {
	return s.t.limiter.Cost([3]uint32{grid.X, grid.Y, grid.Z}, [3]uint32{block.X, block.Y, block.Z}, s.class)
}

// admit charges work of the given cost (launchCost for a kernel) to the
// stream's and the tenant's buckets, waiting while they are empty. It is
// the one admission function: kernel launches and anything else run on the
// stream (graphs, library calls) go through it. It fails at once, charging
// nothing, when ctx's deadline falls before the tokens are due (an error
// matching context.DeadlineExceeded), and returns ErrClosed when the stream
// or tenant is, or gets, closed while waiting.
func (s *Stream) admit(ctx context.Context, cost float64) error {
	if s.bucket == nil {
		return nil
	}
	return admitErr(s.bucket.Wait(ctx, cost))
}

// admitLaunch is admit for a launch of f as grid x block, returning what
// it charged. The cost depends on the share (a GPU share's is 0 at share 1,
// the launch-rate model's throttle penalty falls as the limit rises), so a
// launch waiting when SetSMLimit changes it recomputes its cost instead of
// waiting out the old share's price.
func (s *Stream) admitLaunch(ctx context.Context, f *Function, grid, block Dim3) (float64, error) {
	return s.admitCost(ctx, func() float64 { return s.cost(f, grid, block) })
}

// admitCost is admit for work whose cost depends on the share (graphs and
// Do under a GPU share: 0 at share 1): cost is evaluated again whenever a
// change of share wakes the waiter. It returns what it charged.
func (s *Stream) admitCost(ctx context.Context, cost func() float64) (float64, error) {
	if s.bucket == nil {
		return 0, nil
	}
	charged, err := s.bucket.WaitCost(ctx, cost)
	return charged, admitErr(err)
}

func admitErr(err error) error {
	if errors.Is(err, tokenbucket.ErrClosed) {
		return ErrClosed
	}
	return err
}

// checkLaunch validates a launch of f on s.
func (s *Stream) checkLaunch(f *Function, grid, block Dim3) error {
	if s.t.closed.Load() || s.closed.Load() {
		return ErrClosed
	}
	if f == nil {
		return fmt.Errorf("%w: launch of a nil *Function on tenant %q", ErrInvalidArgument, s.t.name)
	}
	if f.m.t != s.t {
		return fmt.Errorf("%w: kernel %q belongs to tenant %q, stream to %q", ErrInvalidArgument, f.name, f.m.t.name, s.t.name)
	}
	if !grid.Valid() || !block.Valid() {
		return fmt.Errorf("%w: launch of %q with grid %v, block %v; every dimension must be at least 1", ErrInvalidArgument, f.name, grid, block)
	}
	return nil
}

// checkArgs refuses a nil *Args.
func checkArgs(f *Function, args *Args) error {
	if args == nil {
		return fmt.Errorf("%w: launch of %q with nil *Args; pass &fcsp.Args{} for a kernel without parameters", ErrInvalidArgument, f.name)
	}
	if f.offs == nil && f.sig == "" {
		return nil // not PTX text: the driver's to check
	}
	// The parameters Args packed must lie where the kernel reads them: a
	// wrong count or size reaches the device otherwise, and a kernel that
	// reads a pointer where an int was put faults it for every tenant.
	got := args.a.Offsets()
	ok := len(got) == len(f.offs) && uint32(len(args.a.Bytes())) == f.end
	for i := 0; ok && i < len(got); i++ {
		ok = got[i] == f.offs[i]
	}
	if !ok {
		return fmt.Errorf("%w: launch of %q with %d parameters in %d bytes; the kernel takes %s, %d parameters in %d bytes (Ptr, Uint64: 8 bytes; Int32, Uint32, Float32: 4)",
			ErrInvalidArgument, f.name, len(got), len(args.a.Bytes()), f.sig, len(f.offs), f.end)
	}
	return nil
}

// TryLaunch is Launch without waiting: if the stream's and the tenant's
// buckets hold the launch's cost now it is charged and launched, otherwise
// it returns ErrThrottled having launched and charged nothing.
func (s *Stream) TryLaunch(f *Function, grid, block Dim3, shmem uint32, args *Args) error {
	if err := s.checkLaunch(f, grid, block); err != nil {
		return err
	}
	if err := checkArgs(f, args); err != nil {
		return err
	}
	c := s.t
	slot, err := c.enter() // charge and launch inside the life lock, as Launch
	if err != nil {
		return err
	}
	defer c.life.exit(slot)
	if s.recordCapture(grid, block) {
		return s.launchCounted(f, grid, block, shmem, args)
	}
	if s.meter != nil {
		return s.launchMetered(context.Background(), f, grid, block, shmem, args, true)
	}
	if s.bucket != nil && !s.bucket.TryAcquire(s.launchCost(grid, block)) {
		if s.t.closed.Load() || s.closed.Load() {
			return ErrClosed
		}
		return ErrThrottled
	}
	return s.launchCounted(f, grid, block, shmem, args)
}

// Reservation is a launch admitted ahead of time by Stream.Reserve: Launch
// it once Delay has passed (Launch waits for that), or Cancel it to give
// back exactly what it took.
type Reservation struct {
	s           *Stream
	f           *Function
	grid, block Dim3
	cost        float64
	extra       float64                  // a bandwidth floor's surcharge (priority.go), in the reservation too
	mark        tokenbucket.Mark         // the bucket's parameters just before Reserve charged it
	r           *tokenbucket.Reservation // nil: the stream is not limited
}

// Reserve charges a launch of f as grid x block now, going into debt if the
// buckets do not hold it, and returns the reservation; Delay says how long
// until it may run.
func (s *Stream) Reserve(f *Function, grid, block Dim3) (*Reservation, error) {
	if err := s.checkLaunch(f, grid, block); err != nil {
		return nil, err
	}
	r := &Reservation{s: s, f: f, grid: grid, block: block}
	if s.bucket != nil {
		if s.meter != nil {
			if err := s.t.do(s.poll); err != nil {
				return nil, err
			}
		}
		r.cost = s.cost(f, grid, block)
		r.extra = s.floorSurcharge(f, grid, block, r.cost)
		r.mark = s.bucket.Mark()
		r.r = s.bucket.Reserve(r.cost + r.extra)
		if !r.r.OK() {
			return nil, ErrClosed
		}
	}
	return r, nil
}

// Delay is how long from now until the reserved launch may run (0: now).
func (r *Reservation) Delay() time.Duration {
	if r.r == nil {
		return 0
	}
	return r.r.Delay()
}

// Cancel gives back what Reserve took, unless the reservation was launched
// or cancelled before.
func (r *Reservation) Cancel() {
	if r.r != nil {
		r.r.Cancel()
	}
}

// Launch waits until the reservation is due and launches the reserved
// kernel and shape. It fails at once when ctx's deadline falls before that
// (context.DeadlineExceeded), and with ErrClosed if the stream or tenant
// closes; either way the reservation is cancelled. A reservation launches
// once.
func (r *Reservation) Launch(ctx context.Context, shmem uint32, args *Args) error {
	s := r.s
	if err := s.checkLaunch(r.f, r.grid, r.block); err != nil {
		r.Cancel()
		return err
	}
	if err := checkArgs(r.f, args); err != nil {
		r.Cancel()
		return err
	}
	if r.r != nil {
		if err := r.r.Wait(ctx); err != nil {
			return admitErr(err)
		}
	}
	if s.meter != nil {
		charged := r.cost
		if !s.t.gpuShare {
			charged = 0
		}
		err := s.launchTimed(r.f, r.grid, r.block, shmem, args, charged, r.mark)
		if err != nil && r.extra > 0 {
			s.bucket.AdjustSince(-r.extra, r.mark) // launchTimed gave back the base: nothing ran
		}
		return err
	}
	return s.launch(r.f, r.grid, r.block, shmem, args)
}
