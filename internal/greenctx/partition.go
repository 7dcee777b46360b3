package greenctx

import (
	"errors"
	"fmt"
	"slices"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// Partition is a green context over a set of SMs, with one non-blocking
// stream of its own.
type Partition struct {
	drv    cuda.Driver
	dev    *Device
	res    []cuda.DevResource // its groups, kept to rebuild it (reset.go)
	green  cuda.GreenCtx
	ctx    cuda.Context
	stream cuda.Stream
	sms    int

	// mu serialises calls that make this context current: the driver lets a
	// green context be current on one thread at a time and does no locking.
	mu      threadMutex
	streams []cuda.Stream
	closed  bool
	release func()
}

func newPartition(d *Device, res []cuda.DevResource) (*Partition, error) {
	drv := d.drv
	desc, err := drv.DevResourceGenerateDesc(res)
	if err != nil {
		return nil, err
	}
	g, err := drv.GreenCtxCreate(desc, d.dev, cuda.GreenCtxDefaultStream)
	if err != nil {
		return nil, err
	}
	p := &Partition{drv: drv, dev: d, res: res, green: g}
	fail := func(err error) (*Partition, error) {
		return nil, errors.Join(err, drv.GreenCtxDestroy(g))
	}
	if p.ctx, err = drv.CtxFromGreenCtx(g); err != nil {
		return fail(err)
	}
	if p.stream, err = drv.GreenCtxStreamCreate(g, cuda.StreamNonBlocking, 0); err != nil {
		return fail(err)
	}
	got, err := drv.GreenCtxGetDevResource(g, cuda.ResourceSM)
	if err != nil {
		return fail(err)
	}
	p.sms = int(got.SMCount())
	return p, nil
}

// SMs is how many SMs the driver says the green context holds (read back,
// not the number asked for).
func (p *Partition) SMs() int { return p.sms }

// Context is the CUcontext of the green context (cuCtxFromGreenCtx).
func (p *Partition) Context() cuda.Context { return p.ctx }

// GreenCtx is the CUgreenCtx handle.
func (p *Partition) GreenCtx() cuda.GreenCtx { return p.green }

// Stream is the partition's own non-blocking stream.
func (p *Partition) Stream() cuda.Stream { return p.stream }

// NewStream creates another non-blocking stream on the partition; it is
// destroyed with the partition.
func (p *Partition) NewStream(priority int) (cuda.Stream, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.green == 0 { // closed, or abandoned (reset.go)
		return 0, ErrClosed
	}
	s, err := p.drv.GreenCtxStreamCreate(p.green, cuda.StreamNonBlocking, priority)
	if err != nil {
		return 0, err
	}
	p.streams = append(p.streams, s)
	return s, nil
}

// DestroyStream waits for a stream made by NewStream and destroys it. The
// partition's first stream lives as long as the partition.
func (p *Partition) DestroyStream(s cuda.Stream) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.green == 0 { // closed, or abandoned (reset.go)
		return ErrClosed
	}
	i := slices.Index(p.streams, s)
	if i < 0 {
		return fmt.Errorf("greenctx: stream %#x was not made by NewStream on %v", uintptr(s), p)
	}
	p.streams = slices.Delete(p.streams, i, i+1)
	return errors.Join(p.drv.StreamSynchronize(p.ctx, s), p.drv.StreamDestroy(p.ctx, s))
}

// Do runs f with the partition's context while no other caller of Do on
// this partition runs; f passes ctx to the driver calls that need it.
func (p *Partition) Do(f func(ctx cuda.Context) error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.green == 0 { // closed, or abandoned (reset.go)
		return ErrClosed
	}
	return f(p.ctx)
}

// Reset readies the partition for another owner: it waits for its streams
// and destroys all but the first, keeping the green context (whose creation
// is the expensive part).
func (p *Partition) Reset() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.green == 0 { // closed, or abandoned (reset.go)
		return ErrClosed
	}
	var errs []error
	if err := p.drv.StreamSynchronize(p.ctx, p.stream); err != nil {
		errs = append(errs, err)
	}
	for _, s := range p.streams {
		errs = append(errs, p.drv.StreamSynchronize(p.ctx, s), p.drv.StreamDestroy(p.ctx, s))
	}
	p.streams = nil
	return errors.Join(errs...)
}

// Close waits for the partition's streams, destroys them and the green
// context, and returns its groups to the split. It is idempotent.
func (p *Partition) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	var errs []error
	if p.green == 0 { // abandoned (reset.go): nothing of it is left in the driver
		if p.release != nil {
			p.release()
		}
		return nil
	}
	for _, s := range append([]cuda.Stream{p.stream}, p.streams...) {
		if err := p.drv.StreamSynchronize(p.ctx, s); err != nil {
			errs = append(errs, err)
		}
		if err := p.drv.StreamDestroy(p.ctx, s); err != nil {
			errs = append(errs, err)
		}
	}
	if err := p.drv.GreenCtxDestroy(p.green); err != nil {
		errs = append(errs, err)
	}
	if p.release != nil {
		p.release()
	}
	return errors.Join(errs...)
}

func (p *Partition) String() string { return fmt.Sprintf("green context with %d SMs", p.sms) }
