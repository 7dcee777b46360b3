package fcsp

import (
	"context"
	"fmt"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/admission"
)

// checkLaunch validates a launch of f on s with args (checkArgs).
func (s *streamCore) checkLaunch(f *Function, grid, block Dim3, args *Args) error {
	if err := s.checkShape(f, grid, block); err != nil {
		return err
	}
	return checkArgs(f, args)
}

// checkShape validates a launch of f on s as grid x block.
func (s *streamCore) checkShape(f *Function, grid, block Dim3) error {
	if s.t.closed.Load() || s.Closed() {
		return ErrClosed
	}
	if f == nil {
		return fmt.Errorf("%w: a nil *Function; pass one from Module.Function", ErrInvalidArgument)
	}
	if f.m.t != s.t {
		return fmt.Errorf("%w: kernel %q was loaded by %s; launch it on that tenant's streams", ErrInvalidArgument, f.k.Name, tenantName(f.m.t.name))
	}
	return admission.CheckShape(f.k.Name, grid.cuda(), block.cuda())
}

// checkArgs refuses a nil *Args, and Args that do not lie where the
// kernel's PTX says it reads its parameters (modules.Kernel.CheckArgs).
func checkArgs(f *Function, args *Args) error {
	if args == nil {
		return fmt.Errorf("%w: launch of %q with nil *Args; pass &fcsp.Args{} for a kernel without parameters", ErrInvalidArgument, f.k.Name)
	}
	return f.k.CheckArgs(&args.a)
}

// TryLaunch is Launch without waiting: if the stream's and the tenant's
// buckets hold the launch's cost now it is charged and launched, otherwise
// it returns ErrThrottled having launched and charged nothing.
func (h *Stream) TryLaunch(f *Function, grid, block Dim3, shmem uint32, args *Args) error {
	s, err := h.acquire()
	if err != nil {
		return err
	}
	defer s.release()
	return s.t.fail("Stream.TryLaunch", s.launch(context.Background(), f, grid, block, shmem, args, true))
}

// Reservation is a launch admitted ahead of time by Stream.Reserve: Launch
// it once Delay has passed (Launch waits for that), or Cancel it to give
// back exactly what it took.
type Reservation struct {
	s           *Stream
	f           *Function
	grid, block Dim3
	r           admission.Reservation
}

// Reserve charges a launch of f as grid x block now, going into debt if the
// buckets do not hold it, and returns the reservation; Delay says how long
// until it may run.
func (h *Stream) Reserve(f *Function, grid, block Dim3) (*Reservation, error) {
	s, err := h.acquire()
	if err != nil {
		return nil, err
	}
	defer s.release()
	if err := s.checkShape(f, grid, block); err != nil {
		return nil, s.t.fail("Stream.Reserve", err)
	}
	r, err := s.Reserve(&f.k, grid.cuda(), block.cuda())
	if err != nil {
		return nil, s.t.fail("Stream.Reserve", err)
	}
	return &Reservation{s: h, f: f, grid: grid, block: block, r: r}, nil
}

// Delay is how long from now until the reserved launch may run (0: now).
func (r *Reservation) Delay() time.Duration { return r.r.Delay() }

// Cancel gives back what Reserve took, unless the reservation was launched
// or cancelled before.
func (r *Reservation) Cancel() { r.r.Cancel() }

// Launch waits until the reservation is due and launches the reserved
// kernel and shape. It fails at once when ctx's deadline falls before that
// (context.DeadlineExceeded), and with ErrClosed if the stream or tenant
// closes; either way the reservation is cancelled. A reservation launches
// once.
func (r *Reservation) Launch(ctx context.Context, shmem uint32, args *Args) error {
	err := r.launch(ctx, shmem, args)
	if err == nil || r.f == nil {
		return err // a zero Reservation names no tenant
	}
	return r.f.m.t.fail("Reservation.Launch", err)
}

// launch is Launch, its errors bare.
func (r *Reservation) launch(ctx context.Context, shmem uint32, args *Args) error {
	if ctx == nil {
		r.Cancel()
		return errNilContext
	}
	if err := r.check(args); err != nil {
		r.Cancel()
		return err
	}
	tk, err := r.r.Wait(ctx) // not counted in the stream's calls: a Close meanwhile need not wait for it
	if err != nil {
		return err
	}
	s, err := r.s.acquire()
	if err != nil {
		// The stream closed while the reservation waited: its bucket went
		// with it, and the ticket's gate may serve another stream by now,
		// so its tokens are not given back (tk.Cancel would give them to
		// that one); its place in the tenant's queue bound is.
		tk.Drop()
		return err
	}
	defer s.release()
	c := s.t
	slot, err := c.enter()
	if err != nil {
		tk.Cancel()
		return err
	}
	defer c.life.Exit(slot)
	return s.RunReserved(&tk, &r.f.k, r.grid.cuda(), r.block.cuda(), shmem, &args.a)
}

// check is the reserved launch's checkLaunch with args.
func (r *Reservation) check(args *Args) error {
	s, err := r.s.acquire()
	if err != nil {
		return err
	}
	defer s.release()
	return s.checkLaunch(r.f, r.grid, r.block, args)
}
