package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/fcsp-go/fcsp-go/examples/internal/gemmjob"
	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// GEMM shapes, as examples/gemm: decode-like and prefill-like.
const (
	interM, interN, interK = 64, 4096, 4096
	batchN                 = 8192
)

// worker is one request goroutine's work: its own stream and (with cuBLAS)
// its own handle. Run queues one request inside Tenant.Do on that stream;
// the caller synchronises the stream to wait for it.
type worker interface {
	Run(ctx context.Context) error
	Warm(ctx context.Context) error // Run in each of the tenant's contexts (Tenant.DoEach)
	Stream() *fcsp.Stream
	Check() error
	Close(ctx context.Context) error
}

// class is one request class on its tenant: the workers made for the
// largest K, of which a cell uses the first K.
type class struct {
	name    string
	t       *fcsp.Tenant
	flops   float64 // per request
	workers []worker
	streams []*fcsp.Stream
	chain   *fcsp.Function // the fallback kernel, loaded once per tenant
	probe   *probe
}

// workKind says what a request is: cuBLAS bf16 GEMMs, or, where cuBLAS is
// absent (the simulator, a machine without it), the chain kernel sized to
// stand in for them.
type workKind struct {
	cublas bool
	// chain sizes (elements, FMA steps) per class, without cuBLAS.
	interN, interSteps, batchN, batchSteps int
}

func (w workKind) String() string {
	if w.cublas {
		return "cublas"
	}
	return "chain"
}

// workFor is the work a cell runs on pool: cuBLAS where it loaded (and
// the pool is a GPU's), else the chain kernel.
func workFor(pool *fcsp.Pool, haveCublas bool) workKind {
	if haveCublas && !pool.Device().Simulated {
		return workKind{cublas: true}
	}
	return chainWork(pool.Device().Simulated)
}

func chainWork(simulated bool) workKind {
	if simulated {
		// The simulator computes the chain in Go: keep it small.
		return workKind{interN: 1024, interSteps: 16, batchN: 4096, batchSteps: 32}
	}
	return workKind{interN: 64 << 10, interSteps: 1024, batchN: 16 << 20, batchSteps: 4096}
}

// newClass makes the class's workers, each on a stream of its own, and
// warms each up once (cuBLAS picks and loads its kernels on first use).
func newClass(ctx context.Context, name string, t *fcsp.Tenant, batch bool, n int, wk workKind) (*class, error) {
	return makeClass(ctx, name, t, batch, n, wk, true)
}

// makeClass is newClass; without warm, the workers are made (streams,
// matrices, handles) but run nothing: -coldstart's fresh tenant.
func makeClass(ctx context.Context, name string, t *fcsp.Tenant, batch bool, n int, wk workKind, warm bool) (*class, error) {
	c := &class{name: name, t: t}
	if !wk.cublas {
		mod, err := t.LoadModule(kernels.ChainPTX)
		if err != nil {
			return nil, err
		}
		if c.chain, err = mod.Function("chain"); err != nil {
			return nil, err
		}
	}
	for range n {
		s, err := t.NewStream(fcsp.ClassDefault)
		if err != nil {
			return c, errors.Join(err, c.close(ctx))
		}
		c.streams = append(c.streams, s)
		var w worker
		switch {
		case wk.cublas && batch:
			w, err = gemmjob.New(ctx, t, batchN, batchN, batchN, gemmjob.WithStream(s))
			c.flops = 2 * batchN * batchN * batchN
		case wk.cublas:
			w, err = gemmjob.New(ctx, t, interM, interN, interK, gemmjob.WithStream(s))
			c.flops = 2 * interM * interN * interK
		case batch:
			w, err = newChainJob(ctx, t, s, c.chain, wk.batchN, wk.batchSteps)
			c.flops = 2 * float64(wk.batchN) * float64(wk.batchSteps)
		default:
			w, err = newChainJob(ctx, t, s, c.chain, wk.interN, wk.interSteps)
			c.flops = 2 * float64(wk.interN) * float64(wk.interSteps)
		}
		if err != nil {
			return c, errors.Join(fmt.Errorf("%s worker: %w", name, err), c.close(ctx))
		}
		c.workers = append(c.workers, w)
		if !warm {
			continue
		}
		if err := errors.Join(w.Run(ctx), w.Check()); err != nil {
			return c, errors.Join(fmt.Errorf("%s warm-up: %w", name, err), c.close(ctx))
		}
	}
	// Every context Do may hold, warmed before any cell measures: made,
	// and cuBLAS's kernels loaded in it (a load waits for the whole device).
	if warm && len(c.workers) > 0 {
		if err := c.workers[0].Warm(ctx); err != nil {
			return c, errors.Join(fmt.Errorf("%s warm-up of every context: %w", name, err), c.close(ctx))
		}
	}
	return c, nil
}

// close frees the workers and their streams, not the tenant.
func (c *class) close(ctx context.Context) error {
	if c == nil {
		return nil
	}
	var errs []error
	for _, w := range c.workers {
		errs = append(errs, w.Check(), w.Close(ctx))
	}
	for _, s := range c.streams {
		errs = append(errs, s.Close())
	}
	if c.probe != nil {
		errs = append(errs, c.probe.close())
	}
	c.workers, c.streams, c.probe = nil, nil, nil
	return errors.Join(errs...)
}

// chainJob is the stand-in request without cuBLAS: one launch of the chain
// kernel, queued inside Do as a library's launch would be.
type chainJob struct {
	t        *fcsp.Tenant
	s        *fcsp.Stream
	fn       *fcsp.Function
	buf      fcsp.DevicePtr
	n, steps int
	args     fcsp.Args
	ran      atomic.Bool // a launch was queued: Check has a result to read
}

func newChainJob(ctx context.Context, t *fcsp.Tenant, s *fcsp.Stream, fn *fcsp.Function, n, steps int) (*chainJob, error) {
	buf, err := t.Alloc(ctx, uint64(4*n))
	if err != nil {
		return nil, err
	}
	j := &chainJob{t: t, s: s, fn: fn, buf: buf, n: n, steps: steps}
	j.args.Ptr(buf).Int32(int32(n)).Int32(int32(steps))
	return j, nil
}

func (j *chainJob) Run(ctx context.Context) error {
	return j.t.Do(ctx, func(fcsp.Current) error { return j.launch(ctx) })
}

// launch queues the request's one kernel.
func (j *chainJob) launch(ctx context.Context) error {
	j.ran.Store(true)
	return j.s.Launch(ctx, j.fn, fcsp.Dim3{X: uint32((j.n + 255) / 256), Y: 1, Z: 1}, fcsp.Dim3{X: 256, Y: 1, Z: 1}, 0, &j.args)
}

func (j *chainJob) Warm(ctx context.Context) error {
	if err := j.t.DoEach(ctx, func(fcsp.Current) error { return j.launch(ctx) }); err != nil {
		return err
	}
	return j.s.Synchronize()
}

func (j *chainJob) Stream() *fcsp.Stream { return j.s }

// Check reads the first elements back and compares them with the chain's
// model; a job that never ran (a -coldstart worker the simulator's
// scheduler started after the window closed) has nothing to check.
func (j *chainJob) Check() error {
	if !j.ran.Load() {
		return nil
	}
	if err := j.s.Synchronize(); err != nil {
		return err
	}
	out := make([]byte, 4*min(j.n, 4096))
	if err := j.t.CopyFromDevice(out, j.buf); err != nil {
		return err
	}
	return kernels.CheckChain(out, j.steps)
}

func (j *chainJob) Close(context.Context) error { return j.t.Free(j.buf) }
