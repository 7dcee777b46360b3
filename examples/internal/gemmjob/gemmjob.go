// Package gemmjob is a cuBLAS bf16 GEMM bound to an fcsp tenant, shared by
// the examples that run one (examples/gemm, examples/throttle): a handle
// made inside Tenant.Do with the tenant's SM count and a workspace from its
// quota, three matrices on the tenant, and one GEMM per Run, queued inside
// Do so that the SDK sees (and, where it meters Do, charges) the work.
package gemmjob

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/fcsp-go/fcsp-go/examples/internal/cublas"
	"github.com/fcsp-go/fcsp-go/fcsp"
)

// bf16 values: the top half of the float32.
const (
	BF16One  = 0x3f80 // 1.0
	BF16Half = 0x3f00 // 0.5
)

// BF16 is f rounded toward zero to bf16.
func BF16(f float32) uint16 { return uint16(math.Float32bits(f) >> 16) }

// DefaultCublas is where cuBLAS is looked for without an explicit path:
// the CUDA toolkit's place, then the dynamic loader's search path.
var DefaultCublas = []string{"/usr/local/cuda/lib64/libcublas.so.13", "libcublas.so.13"}

// LoadCublas loads cuBLAS from path as given, or, where path is empty,
// from the first of DefaultCublas that loads; it returns the path loaded.
func LoadCublas(path string) (string, error) {
	if path != "" {
		return path, cublas.Load(path)
	}
	return cublas.LoadDefault(DefaultCublas...)
}

// WorkspaceBytes is the cuBLAS workspace each Job takes from its tenant.
const WorkspaceBytes = 32 << 20

// Job is C = A B (m x k times k x n, bf16, A all 1.0 and B all 0.5) on
// tenant T.
type Job struct {
	T       *fcsp.Tenant
	M, N, K int
	// SmCountTarget is the SM count the cuBLAS handle was told
	// (cublasSetSmCountTarget); 0 with WithoutSmCountTarget.
	SmCountTarget int
	s             *fcsp.Stream // nil: the tenant's first stream
	destroyed     sync.Once    // the handle's destroy (Close or the tenant's OnClose)
	h             cublas.Handle
	ws            *fcsp.Workspace
	a, b, c       fcsp.DevicePtr
	// run is the request Run queues, made once: a closure made per
	// request would be garbage per request, and a goroutine that
	// allocates while the collector runs is made to help it.
	run func(fcsp.Current) error
	// The stream the handle is bound to, and its SM count's guard: the
	// runs of a DoEach share the job.
	mu    sync.Mutex
	bound uintptr
}

// Option changes how New makes a Job.
type Option func(*options)

type options struct {
	noSmTarget  bool
	noWorkspace bool
	stream      *fcsp.Stream
}

// WithoutSmCountTarget leaves the handle without cublasSetSmCountTarget:
// cuBLAS then picks its kernels as for the whole device, however few SMs
// the tenant has. For measuring what the hint costs or buys.
func WithoutSmCountTarget() Option { return func(o *options) { o.noSmTarget = true } }

// WithoutWorkspace leaves the handle without cublasSetWorkspace: cuBLAS
// then allocates its workspace itself, with the runtime, where no quota
// or device limit sees it (PoolStats.DeviceMemory.Unaccounted does). For
// measuring what a handle takes on its own (examples/memlimit -handle).
func WithoutWorkspace() Option { return func(o *options) { o.noWorkspace = true } }

// WithStream makes the job fill its matrices, bind its cuBLAS handle and
// its workspace, and synchronise in Check, on s (one of t's streams) rather
// than on the tenant's first stream: one stream and handle per goroutine,
// as a server that serves requests from many goroutines has them.
func WithStream(s *fcsp.Stream) Option { return func(o *options) { o.stream = s } }

// New allocates the matrices on t, fills them on t's stream (WithStream's,
// if given), and makes the job's cuBLAS handle inside t.Do, told the
// tenant's SM count unless WithoutSmCountTarget is given and given a
// workspace from the tenant's quota (WorkspaceBytes) unless
// WithoutWorkspace is. cuBLAS must have been loaded (cublas.Load
// or LoadDefault).
func New(ctx context.Context, t *fcsp.Tenant, m, n, k int, opts ...Option) (*Job, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	j := &Job{T: t, M: m, N: n, K: k, s: o.stream}
	j.run = func(cur fcsp.Current) error {
		if err := j.follow(cur, o); err != nil {
			return err
		}
		return j.gemm()
	}
	var err error
	alloc := func(words int) fcsp.DevicePtr {
		if err != nil {
			return 0
		}
		var p fcsp.DevicePtr
		p, err = t.Alloc(ctx, uint64(2*words))
		return p
	}
	j.a, j.b, j.c = alloc(m*k), alloc(k*n), alloc(m*n)
	if err != nil {
		return nil, errors.Join(err, j.Close(ctx))
	}
	// Inputs written in order on the tenant's own stream: a fill on the
	// legacy NULL stream would race the GEMM on this non-blocking stream.
	s := j.Stream()
	if err := errors.Join(s.MemsetD16(j.a, BF16One, uint64(m*k)), s.MemsetD16(j.b, BF16Half, uint64(k*n)), s.MemsetD16(j.c, 0, uint64(m*n))); err != nil {
		return nil, errors.Join(err, j.Close(ctx))
	}
	err = t.Do(ctx, func(cur fcsp.Current) error {
		h, err := cublas.Create()
		if err != nil {
			return err
		}
		j.h = h
		// However the tenant ends (Close, its context, the pool closing),
		// the handle is destroyed on its context first.
		if err := t.OnClose(func(fcsp.Current) error { return j.destroy() }); err != nil {
			return err
		}
		st, err := cur.Stream(o.stream)
		if err != nil {
			return err
		}
		if !o.noSmTarget {
			if err := h.SetSmCountTarget(cur.SMs()); err != nil {
				return err
			}
			j.SmCountTarget = cur.SMs()
		}
		j.bound = uintptr(st.Pointer())
		if err := h.SetStream(st.Pointer()); err != nil || o.noWorkspace {
			return err
		}
		// cuBLAS's scratch from the tenant's quota, in its pool: without
		// it the handle allocates its own, which nothing counts.
		if j.ws, err = cur.Workspace(o.stream, WorkspaceBytes); err != nil {
			return err
		}
		return h.SetWorkspace(j.ws.Pointer(), j.ws.Size())
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("tenant %s: cuBLAS handle: %w", t.Name(), err), j.Close(ctx))
	}
	return j, nil
}

// follow tells the handle where the tenant is now: its stream's handle
// and its SMs change when it is reshaped (Reshape, WithLatencyTarget's
// controller), and a handle bound before would queue on the old layout's
// stream (its SMs, unordered with the work after) and pick kernels for the
// old SM count.
func (j *Job) follow(cur fcsp.Current, o options) error {
	st, err := cur.Stream(o.stream)
	if err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if p := uintptr(st.Pointer()); p != j.bound {
		if err := j.h.SetStream(st.Pointer()); err != nil {
			return err
		}
		j.bound = p
	}
	if n := cur.SMs(); !o.noSmTarget && j.SmCountTarget != 0 && n != j.SmCountTarget {
		if err := j.h.SetSmCountTarget(n); err != nil {
			return err
		}
		j.SmCountTarget = n
	}
	return nil
}

// Stream is the stream the job queues on: WithStream's, or the tenant's
// first.
func (j *Job) Stream() *fcsp.Stream {
	if j.s != nil {
		return j.s
	}
	return j.T.Stream()
}

// Run queues one C = A B on the job's stream, inside Do.
func (j *Job) Run(ctx context.Context) error {
	return j.T.Do(ctx, j.run)
}

// gemm queues C = A B with the job's handle, inside a Do.
func (j *Job) gemm() error {
	return j.h.GemmBF16(j.M, j.N, j.K, uint64(j.a), uint64(j.b), uint64(j.c), 1, 0)
}

// Warm queues one C = A B in each of the tenant's contexts (Tenant.DoEach)
// and waits for them: cuBLAS loads its kernels per context on first use,
// and a module load waits for the whole device, so a server pays it before
// it serves rather than in its first requests.
func (j *Job) Warm(ctx context.Context) error {
	if err := j.T.DoEach(ctx, j.run); err != nil {
		return err
	}
	return j.Stream().Synchronize()
}

// Warmup is a tenant's warm-up (fcsp.WithWarmup) for jobs of m x k times
// k x n: in each context the SDK gives it, a cuBLAS handle told that
// context's SMs (Current.SMs) runs one such GEMM on scratch memory from the
// tenant's quota, on the tenant's first stream, and is destroyed (which
// waits for its work). cuBLAS has then loaded, in that context, the
// kernels it picks for that shape and SM count, as a Job's first Run there
// would have on a request's path. The scratch holds whatever the pool
// gave: the GEMM's result is not read.
func Warmup(m, n, k int) func(fcsp.Current) error {
	return func(cur fcsp.Current) (err error) {
		h, err := cublas.Create()
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, h.Destroy()) }()
		st, err := cur.Stream(nil)
		if err != nil {
			return err
		}
		ws, err := cur.Workspace(nil, WorkspaceBytes)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, ws.Close()) }() // in stream order, after the GEMM
		mat, err := cur.Workspace(nil, uint64(2*(m*k+k*n+m*n)))
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, mat.Close()) }()
		if err := errors.Join(h.SetStream(st.Pointer()), h.SetSmCountTarget(cur.SMs()), h.SetWorkspace(ws.Pointer(), ws.Size())); err != nil {
			return err
		}
		a := uint64(mat.Ptr())
		b := a + uint64(2*m*k)
		return h.GemmBF16(m, n, k, a, b, b+uint64(2*k*n), 1, 0)
	}
}

// Check synchronises the tenant's stream and reads the first column block
// of C back: every element is k * 1.0 * 0.5, exact in bf16 for the powers
// of two used here.
func (j *Job) Check() error {
	if err := j.Stream().Synchronize(); err != nil {
		return err
	}
	words := min(j.M*j.N, 64*1024)
	out := make([]byte, 2*words)
	if err := j.T.CopyFromDevice(out, j.c); err != nil {
		return err
	}
	want := BF16(float32(j.K) * 0.5)
	for i := range words {
		if got := binary.LittleEndian.Uint16(out[2*i:]); got != want {
			return fmt.Errorf("tenant %s: C[%d] = bf16 %#04x, want %#04x (%g)", j.T.Name(), i, got, want, float32(j.K)*0.5)
		}
	}
	return nil
}

// Close destroys the handle (inside Do) and frees the workspace and the
// matrices. It is safe on a partly made Job.
func (j *Job) Close(ctx context.Context) error {
	var errs []error
	if j.h != (cublas.Handle{}) {
		err := j.T.Do(ctx, func(fcsp.Current) error { return j.destroy() })
		if !errors.Is(err, fcsp.ErrClosed) { // closed: its OnClose destroyed the handle
			errs = append(errs, err)
		}
	}
	if j.ws != nil {
		errs = append(errs, j.ws.Close())
	}
	for _, p := range []fcsp.DevicePtr{j.a, j.b, j.c} {
		if p != 0 {
			errs = append(errs, j.T.Free(p))
		}
	}
	return errors.Join(errs...)
}

// destroy destroys the cuBLAS handle once, on the tenant's context (from
// Close inside Do, or from the tenant's OnClose).
func (j *Job) destroy() error {
	var err error
	j.destroyed.Do(func() { err = j.h.Destroy() })
	return err
}
