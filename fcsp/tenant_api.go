package fcsp

import (
	"context"
	"runtime"

	"github.com/fcsp-go/fcsp-go/internal/teardown"
)

// The Tenant handle's methods. Each delegates to the core the pool tracks
// and ends with runtime.KeepAlive(t), as os.File's do: the handle carries
// the cleanup that closes a forgotten tenant, so it must stay reachable
// until a call made on it returns, even when the caller drops it at once
// (p.NewTenant(...).Scope(ctx, f)).

// SMs is how many SMs the tenant's partition holds, read back from the
// driver; for an unpartitioned tenant, the whole device's (shared).
func (t *Tenant) SMs() int {
	defer runtime.KeepAlive(t)
	return t.c.SMs()
}

// Stats reports the tenant's use.
func (t *Tenant) Stats() Stats {
	defer runtime.KeepAlive(t)
	return t.c.Stats()
}

// LoadModule loads PTX (or a cubin) into the tenant's context.
func (t *Tenant) LoadModule(image []byte) (*Module, error) {
	defer runtime.KeepAlive(t)
	m, err := t.c.LoadModule(image)
	if err != nil {
		return nil, t.c.fail("LoadModule", err)
	}
	return m, nil
}

// NewEvent makes an event in the tenant's context.
func (t *Tenant) NewEvent() (*Event, error) {
	defer runtime.KeepAlive(t)
	e, err := t.c.NewEvent()
	if err != nil {
		return nil, t.c.fail("NewEvent", err)
	}
	return e, nil
}

// Alloc allocates n bytes of device memory against the tenant's quota, from
// the tenant's stream-ordered pool in order on its first stream (with
// WithoutMemoryPool, cuMemAlloc). It never waits for the device: a freed
// block of the size is reused at once, and the pool grows without a device
// synchronisation, where cuMemAlloc+cuMemFree waited for every kernel of
// the device (50.7 ms beside another partition's 50 ms kernel on the H200).
// The quota is checked first, without locks; an over-quota request fails
// with an error that is errors.Is(err, ErrQuotaExceeded) and names
// requested, used and limit; a driver failure after admission (out of
// memory) gives the quota back.
//
// The memory may be used on any of the tenant's streams and by any
// goroutine. Its Free is ordered on the first stream, which is what makes
// it cheap, so the rule is the stream-ordered allocator's: the work that
// used the memory must have completed (a Synchronize of its stream, as a
// request does before it answers) or be ordered before the Free (FreeAsync
// on the stream that used it) when Free is called, from whichever
// goroutine. A Free from another goroutine after the using stream's
// Synchronize is safe; a Free while a kernel on another stream still reads
// the memory lets the next Alloc reuse it under that kernel.
func (t *Tenant) Alloc(ctx context.Context, n uint64) (DevicePtr, error) {
	defer runtime.KeepAlive(t)
	p, err := t.c.Alloc(ctx, n)
	if err != nil {
		return 0, t.c.fail("Alloc", err)
	}
	return p, nil
}

// Free frees memory the tenant allocated, in order on its first stream
// (see Alloc for what must have finished first). A pointer it does not own
// (never allocated here, another tenant's, already freed) is refused with
// ErrUnknownPointer and changes nothing. The quota is given back at once,
// exactly.
func (t *Tenant) Free(p DevicePtr) error {
	defer runtime.KeepAlive(t)
	return t.c.fail("Free", t.c.Free(p))
}

// AllocAsync allocates n bytes in stream order on s (the memory may be used
// by work queued on s after this call); with WithMemoryPool it comes from
// the tenant's pool. Quota and errors are those of Alloc.
func (t *Tenant) AllocAsync(s *Stream, n uint64) (DevicePtr, error) {
	defer runtime.KeepAlive(t)
	p, err := t.c.AllocAsync(s, n)
	if err != nil {
		return 0, t.c.fail("AllocAsync", err)
	}
	return p, nil
}

// FreeAsync frees p in stream order on s: after the work queued on s.
func (t *Tenant) FreeAsync(s *Stream, p DevicePtr) error {
	defer runtime.KeepAlive(t)
	return t.c.fail("FreeAsync", t.c.FreeAsync(s, p))
}

// Scope runs f with a fresh Scope and frees what f left allocated. A panic
// in f is re-raised after the cleanup; a cleanup failure is joined to f's
// error. If ctx has already ended, f is not run and ctx.Err() is returned;
// the scope's allocations then wait under ctx (Scope.Alloc). The Scope
// holds the Tenant, so the tenant lives while f runs.
func (t *Tenant) Scope(ctx context.Context, f func(s *Scope) error) error {
	defer runtime.KeepAlive(t)
	return t.c.scope(t, ctx, f)
}

// Close synchronises and destroys the tenant's streams, frees what it still
// has allocated, and returns its SMs and quota to the pool. Idempotent; any
// later call on the tenant returns ErrClosed.
func (t *Tenant) Close() error {
	defer runtime.KeepAlive(t)
	if err := t.c.checkNotInsideDo(); err != nil {
		return t.c.fail("Close", err)
	}
	t.c.cleanup.Stop()
	return t.c.fail("Close", t.c.close(teardown.Closed))
}

// Do runs f on a locked OS thread with one of the tenant's contexts
// current on it, for code that uses the current context rather than taking
// one: cuBLAS, cuDNN, TensorRT, a cgo backend. For a partitioned tenant that
// is one of its green contexts, which the driver lets be current on one
// thread at a time and does not lock; so the tenant keeps several, all over
// its SMs, one for each Do in flight (WithConcurrentDos, 16 by default), and
// past that many a Do waits for one in arrival order. No other SDK call
// takes one: a server's allocations, streams, memory figures and scrapes
// never wait for a Do, nor a Do for them (docs/CONTEXTS.md). An
// unpartitioned tenant's Do takes the device's primary context while no
// partition exists (current on any number of threads: it excludes
// nothing), else one of the green contexts of the SMs no partition holds,
// which every unpartitioned tenant shares (made on demand, up to 64).
//
// Afterwards the thread's previous current context is restored and the
// thread unlocked; so is it if f panics, and the panic goes on. f's error
// is returned as is.
//
// Inside f, the SDK's calls on the same tenant (Alloc, NewStream, Launch,
// a nested Do) run directly on f's thread. Library handles made in one Do
// (a cuBLAS handle) work in any other of the tenant's Dos, whichever of its
// green contexts that one holds (measured on the H200). Do of another
// tenant from inside f makes that tenant's context current and restores
// this one after. A Current is valid during its call of f only.
//
// On a metered tenant (WithGPUMetering, WithGPUShare) the work f queues
// on the streams it takes from Current.Stream is timed on the GPU clock
// and counted in Stats (see Current.Stream); under WithGPUShare, Do is
// admitted before f runs, charged a running estimate of its cost per call
// site (f's code pointer; one refill period the first time) and corrected
// when its events complete, so a tenant whose work all goes through Do
// gets its share. It waits for tokens before taking the thread or a
// context; ctx ends that wait with nothing charged, Close with ErrClosed.
// Under WithBandwidthFloor it yields to LatencyCritical tenants as launches
// do. Unmetered tenants pay nothing for this. TryDo does not wait for
// tokens.
//
// A nil f is ErrInvalidArgument; a closed tenant ErrClosed; Close,
// Shutdown, Reshape or the pool's Close from inside f ErrInsideDo. If ctx
// ends while Do waits for a context, Do returns ctx's error at once and f
// does not run.
func (t *Tenant) Do(ctx context.Context, f func(Current) error) error {
	defer runtime.KeepAlive(t)
	return t.c.Do(ctx, f)
}

// DoEach runs f once in each of the tenant's contexts: for a partitioned
// tenant, in every green context Do may hold (WithConcurrentDos; made now
// where not made yet), and for one that can be reshaped (WithReshapeSizes,
// WithLatencyTarget, the rest tenant beside a latency class) in those of
// every size it may take, so that no Reshape meets a cold context; for an unpartitioned one, once in the primary
// context while no partition exists, else in 16 of the commons' green
// contexts (docs/CONTEXTS.md). A server calls it before it serves, to warm what each context
// pays for once: making the context (about 1.2 ms on the H200) and a
// library's first use of its kernels in it (cuBLAS loads them lazily, per
// context, and a module load waits for the whole device, the other
// classes' kernels included). On the H200, 16 request goroutines whose
// first Dos met those costs mid-traffic beside a busy neighbour had a P99
// of 22 ms for their first seconds; warmed, 0.6 ms (docs/BENCHMARKS.md).
// WithWarmup gives the SDK such a function to run itself, before a
// context serves, also in the contexts the commons moves to or makes later.
//
// The runs are concurrent, each a Do, and each holds its context until all
// have run, so that every context gets one; other Dos of the tenant may
// wait meanwhile. The errors of all runs are joined. ctx bounds the waits.
// One DoEach of a tenant runs at a time (a second waits for the first),
// and a Reshape waits for a whole DoEach, never splitting its runs. A panic
// in f goes on in the caller, once every run has returned, as Do's does.
func (t *Tenant) DoEach(ctx context.Context, f func(Current) error) error {
	defer runtime.KeepAlive(t)
	return t.c.DoEach(ctx, f)
}

// AllocWorkspace allocates n bytes for a library that will use them on
// stream s (nil: the first stream). With WithMemoryPool the memory is
// allocated, and on Close freed, in order on s, so s is the stream the
// library must run on (cublasSetStream); without a pool it is plain device
// memory, usable on any stream. The pattern, in Do:
//
//	ws, err := cur.Workspace(s, 32<<20)
//	C.cublasSetStream_v2(h, C.cudaStream_t(stream.Pointer()))
//	C.cublasSetWorkspace_v2(h, ws.Pointer(), C.size_t(ws.Size()))
//	... GEMMs ...
//	C.cublasDestroy_v2(h); ws.Close()
func (t *Tenant) AllocWorkspace(ctx context.Context, s *Stream, n uint64) (*Workspace, error) {
	defer runtime.KeepAlive(t)
	w, err := t.c.AllocWorkspace(ctx, s, n)
	if err != nil {
		return nil, t.c.fail("AllocWorkspace", err)
	}
	return w, nil
}

// Reshape changes the tenant's SMs to sms, one of the sizes it was made
// with (WithReshapeSizes), between requests. It keeps everything else:
// memory and quota (device memory belongs to the device, not to a green
// context), its pool and free lists, its Stream, Module and Function
// values, and work in flight: what was queued on a stream before runs to
// the end on the old SMs, and what is queued after waits for it, then runs
// on the new ones. Reshape waits for the tenant's calls in flight and holds
// new ones back while it switches, which costs a few microseconds with no
// call in flight; a Stream.Synchronize under way is neither waited for nor
// held back (it waits for what was queued before it, on the old SMs).
//
// The SMs a shrink gives up may still run that work for a while, so a
// Reshape that grows first claims the SMs it adds (unpartitioned tenants
// leave them), then waits for what the pool's other tenants queued before
// they gave SMs up, the unpartitioned ones' included, at most 15 ms (a
// tenant may queue seconds of kernels) or until ctx ends: ctx's error
// then, with nothing changed. The tenant's calls go on meanwhile, on the
// SMs it holds. A partition made by NewTenant waits the same way before
// it is returned. The pool's controller (WithLatencyTarget) moves SMs
// through the same Reshapes.
//
// Raw handles taken before (Stream.Handle, Context) stay valid until the
// tenant closes but still name the old layout: work queued on them runs on
// the old SMs, which another tenant may hold by then, and is not ordered
// with work queued through the SDK after the switch. Take them again after
// a Reshape. The tenant's Events stay those of the layout it was made
// with. A launch-rate limit (WithSMLimit) is resized to the new SM count,
// keeping how full its bucket was; a GPU share (WithGPUShare) is of the
// device's time and does not change.
//
// A size the tenant has no layout for is refused with ErrGranularity,
// growing into SMs another tenant holds with ErrInsufficientSMs, a closed
// tenant with ErrClosed, a tenant made without WithReshapeSizes with
// ErrInvalidArgument; none of them changes anything.
func (t *Tenant) Reshape(ctx context.Context, sms int) error {
	defer runtime.KeepAlive(t)
	return t.c.fail("Reshape", t.c.Reshape(ctx, sms))
}

// FreeContext is Free bounded by ctx. Without WithMemoryPool, cuMemFree
// waits for the device's work in flight; FreeContext returns ctx.Err() if
// ctx ends first, and the memory is freed all the same once that work is
// done (do not use p after the call). An ended ctx frees nothing and
// returns ctx.Err(), as Alloc allocates nothing.
func (t *Tenant) FreeContext(ctx context.Context, p DevicePtr) error {
	defer runtime.KeepAlive(t)
	return t.c.fail("FreeContext", t.c.FreeContext(ctx, p))
}

// Shutdown is Close with a deadline, as net/http's Server.Shutdown: it
// closes the tenant (waiting for calls in flight and synchronising its
// streams) and returns Close's error, or ctx.Err() if ctx ends first. The
// close then carries on in the background and the tenant still ends
// closed. The waiting is Close's own, so Shutdown waits for what Close
// waits for.
func (t *Tenant) Shutdown(ctx context.Context) error {
	defer runtime.KeepAlive(t)
	if err := t.c.checkNotInsideDo(); err != nil {
		return t.c.fail("Shutdown", err)
	}
	return t.c.fail("Shutdown", t.c.Shutdown(ctx))
}
