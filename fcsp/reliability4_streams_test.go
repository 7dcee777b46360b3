package fcsp

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
)

// Issue 39, round 4: what stream reuse let through. The tests hold one
// driver call of a racing caller (holdDriver), so that each race is run,
// not hoped for.

// holdDriver is the simulator with one call held on its way in: once
// armed for an operation on a stream, the next such call signals arrived
// and waits for release before it reaches the driver.
type holdDriver struct {
	*fake.Driver
	mu      sync.Mutex
	op      string
	s       cuda.Stream
	arrived chan struct{}
	release chan struct{}
}

// hold arms d for the next op ("cuLaunchKernel", "cuEventRecord",
// "cuStreamSynchronize") on s.
func (d *holdDriver) hold(op string, s cuda.Stream) (arrived, release chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.op, d.s = op, s
	d.arrived, d.release = make(chan struct{}), make(chan struct{})
	return d.arrived, d.release
}

func (d *holdDriver) wait(op string, s cuda.Stream) {
	d.mu.Lock()
	if d.op != op || d.s != s {
		d.mu.Unlock()
		return
	}
	d.op = ""
	arrived, release := d.arrived, d.release
	d.mu.Unlock()
	close(arrived)
	<-release
}

func (d *holdDriver) LaunchKernel(c cuda.Context, f cuda.Function, grid, block cuda.Dim3, shmem uint32, s cuda.Stream, args *cuda.Args) error {
	d.wait("cuLaunchKernel", s)
	return d.Driver.LaunchKernel(c, f, grid, block, shmem, s, args)
}

func (d *holdDriver) StreamSynchronize(c cuda.Context, s cuda.Stream) error {
	d.wait("cuStreamSynchronize", s)
	return d.Driver.StreamSynchronize(c, s)
}

func (d *holdDriver) EventRecord(c cuda.Context, e cuda.Event, s cuda.Stream) error {
	d.wait("cuEventRecord", s)
	return d.Driver.EventRecord(c, e, s)
}

// openHold is openSim on a holdDriver.
func openHold(t *testing.T) (*Pool, *holdDriver) {
	t.Helper()
	var d *holdDriver
	p, err := Open(context.Background(), 0, withDriver(func() cuda.Driver {
		f := fake.New(fake.H200())
		fake.RegisterKernels(f)
		d = &holdDriver{Driver: f}
		return d
	}, true))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return p, d
}

// waitForNewGen waits until the core h names has begun another life (its
// Close retired it, or is retiring it).
func waitForNewGen(t *testing.T, h *Stream) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); h.c.Gen() == h.gen; time.Sleep(50 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stream was never retired")
		}
	}
}

// Issue 39 #1: a launch that passed its checks while Stream.Close ran was
// queued on the CUstream Close had already released: to another tenant's
// next stream (unpartitioned), or to the tenant's own next request's
// (partitioned). Close retires the handle and waits for calls under way
// before the CUstream goes anywhere.
func TestStreamCloseWaitsBeforeItsCUstreamIsReused(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []TenantOption
		next string // whose NewStream may take the CUstream: another tenant's, or the same
	}{
		{"unpartitioned", nil, "b"},
		{"partitioned", []TenantOption{WithSMs(16)}, "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, drv := openHold(t)
			a, err := p.NewTenant("a", tc.opts...)
			require.NoError(t, err)
			next := a
			if tc.next == "b" {
				next, err = p.NewTenant("b")
				require.NoError(t, err)
			}
			fn := spinKernel(t, a)
			ctx := context.Background()
			one := Dim3{X: 1, Y: 1, Z: 1}
			s, err := a.NewStream(ClassDefault)
			require.NoError(t, err)
			h := s.Handle()
			arrived, release := drv.hold("cuLaunchKernel", cuda.Stream(h))
			launched := make(chan error, 1)
			go func() {
				var args Args
				args.Uint64(0)
				launched <- s.Launch(ctx, fn, one, one, 0, &args)
			}()
			<-arrived // past every check, on its way to the driver
			closed := make(chan error, 1)
			go func() { closed <- s.Close() }()
			waitForNewGen(t, s)
			var made []uintptr
			for range 2 {
				n, err := next.NewStream(ClassDefault)
				require.NoError(t, err)
				made = append(made, n.Handle())
				defer func() { require.NoError(t, n.Close()) }()
			}
			close(release)
			require.NoError(t, <-launched)
			require.NoError(t, <-closed)
			require.NotContains(t, made, h, "the CUstream went to another stream while a launch on it was under way")
		})
	}
}

// Issue 39 #1: a pool event recorded through a stream of a tenant whose
// Close runs landed on the stream's next owner: the tenant's Close
// released its streams before it waited for the calls on them. It waits
// first now.
func TestTenantCloseWaitsBeforeItsCUstreamsAreReused(t *testing.T) {
	p, drv := openHold(t)
	a, err := p.NewTenant("a")
	require.NoError(t, err)
	b, err := p.NewTenant("b")
	require.NoError(t, err)
	ev, err := p.NewEvent()
	require.NoError(t, err)
	defer func() { require.NoError(t, ev.Close()) }()
	s, err := a.NewStream(ClassDefault)
	require.NoError(t, err)
	h := s.Handle()
	arrived, release := drv.hold("cuEventRecord", cuda.Stream(h))
	recorded := make(chan error, 1)
	go func() { recorded <- ev.Record(s) }()
	<-arrived
	closed := make(chan error, 1)
	go func() { closed <- a.Close() }()
	waitForNewGen(t, s)
	var made []uintptr
	for range 3 { // the first stream's CUstream, released whole, may come first
		n, err := b.NewStream(ClassDefault)
		require.NoError(t, err)
		made = append(made, n.Handle())
		defer func() { require.NoError(t, n.Close()) }()
	}
	close(release)
	require.NoError(t, <-recorded)
	require.NoError(t, <-closed)
	require.NotContains(t, made, h, "a closing tenant's CUstream went to another tenant while an event was being recorded on it")
}

// Issue 39 #1: Event.Record checked the stream's own flag alone, so a pool
// event was recorded through a stream of a tenant whose Close had begun.
func TestEventRecordThroughAClosingTenantsStream(t *testing.T) {
	p, drv := openHold(t)
	a, err := p.NewTenant("a", WithSMs(16))
	require.NoError(t, err)
	fn := spinKernel(t, a)
	ev, err := p.NewEvent()
	require.NoError(t, err)
	defer func() { require.NoError(t, ev.Close()) }()
	s, err := a.NewStream(ClassDefault)
	require.NoError(t, err)
	busy, err := a.NewStream(ClassDefault)
	require.NoError(t, err)
	// A launch held in the driver keeps the tenant's Close waiting for it.
	arrived, release := drv.hold("cuLaunchKernel", cuda.Stream(busy.Handle()))
	launched := make(chan error, 1)
	go func() {
		var args Args
		args.Uint64(0)
		one := Dim3{X: 1, Y: 1, Z: 1}
		launched <- busy.Launch(context.Background(), fn, one, one, 0, &args)
	}()
	<-arrived
	closed := make(chan error, 1)
	go func() { closed <- a.Close() }()
	for !a.c.closed.Load() {
		time.Sleep(50 * time.Microsecond)
	}
	err = ev.Record(s)
	close(release)
	require.ErrorIs(t, err, ErrClosed, "an event recorded through a closing tenant's stream")
	require.NoError(t, <-launched)
	require.NoError(t, <-closed)
}

// Issue 39 #12 and issue 38 #8: a class outside the defined ones, given to
// Adopt or registered for the handle, poisoned a metered tenant (Stats,
// Pool.Stats and Close then panicked with an index out of range); handle
// 0, the legacy NULL stream, was adopted as a stream of the tenant's.
func TestAdoptRefusesBadClassesAndTheNullStream(t *testing.T) {
	p, _ := openSim(t)
	a, err := p.NewTenant("a", WithGPUMetering())
	require.NoError(t, err)
	other, err := a.NewStream(ClassDefault)
	require.NoError(t, err)
	h := other.Handle()

	_, err = a.Adopt(h, Class(9))
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorContains(t, err, "nccl", "the error says which classes there are")
	require.ErrorIs(t, p.RegisterStream(h, Class(200)), ErrInvalidArgument, "a bad class is refused where it is registered")
	require.ErrorIs(t, p.RegisterStream(0, ClassNCCL), ErrInvalidArgument, "the NULL stream")
	adoptedDefault, err := a.Adopt(h, ClassDefault)
	require.NoError(t, err, "the refused registration labelled nothing")
	require.Equal(t, ClassDefault, adoptedDefault.Class())
	require.NoError(t, adoptedDefault.Close())
	_, err = a.Adopt(0, ClassNCCL)
	require.ErrorIs(t, err, ErrInvalidArgument, "the NULL stream")
	_, err = a.NewStream(Class(4))
	require.ErrorIs(t, err, ErrInvalidArgument)

	require.NotPanics(t, func() { _ = a.Stats(); _ = p.Stats() })
	require.Equal(t, 2, a.Stats().Streams, "nothing refused was listed")
	adopted, err := a.Adopt(h, ClassNCCL)
	require.NoError(t, err)
	require.Equal(t, ClassNCCL, adopted.Class())
	require.NoError(t, adopted.Close())
	require.NoError(t, a.Close())
}

// Issue 39 #13: Stats summed the launch and throttle counters over the open
// streams, so they went down when a stream closed (Prometheus saw a
// counter reset at every request). A closed stream's figures stay the
// tenant's. The limiter's clock stands still between the two launches, so
// that the second waits however long the host takes to launch it (on the
// wall clock a host busy for a refill period let it in at once: CI, 2
// cores, the race detector's run beside the storm's).
func TestStatsCountersOutliveTheirStream(t *testing.T) {
	p, _ := openSim(t, WithLimiterTuning(LimiterTuning{ThrottlePenalty: NoThrottlePenalty}))
	var clk simClock
	a, err := p.NewTenant("a", WithSMs(8), WithSMLimit(0.01), WithGPUMetering(), withClock(clk.now))
	require.NoError(t, err)
	fn := spinKernel(t, a)
	ctx := context.Background()
	one := Dim3{X: 1, Y: 1, Z: 1}
	var args Args
	args.Uint64(0)
	s, err := a.NewStream(ClassDefault)
	require.NoError(t, err)
	require.NoError(t, s.Launch(ctx, fn, Dim3{X: 20000, Y: 1, Z: 1}, one, 0, &args)) // empties the buckets
	second := make(chan error, 1)
	go func() { second <- s.Launch(ctx, fn, Dim3{X: 100, Y: 1, Z: 1}, one, 0, &args) }() // waits for tokens
	requireNoneWithin(t, second, 20*time.Millisecond, "the second launch went in with the buckets empty and the clock still")
	for waiting := true; waiting; {
		select {
		case err := <-second:
			require.NoError(t, err)
			waiting = false
		case <-time.After(100 * time.Microsecond):
			clk.advance(time.Millisecond)
		}
	}
	before := a.Stats()
	require.EqualValues(t, 2, before.Launches)
	require.NotZero(t, before.Throttled, "the second launch waited: the test proves nothing otherwise")
	require.NotZero(t, before.ThrottleWait)
	require.NoError(t, s.Close())
	after := a.Stats()
	require.GreaterOrEqual(t, after.Launches, before.Launches, "launches went down when a stream closed")
	require.GreaterOrEqual(t, after.Throttled, before.Throttled)
	require.GreaterOrEqual(t, after.ThrottleWait, before.ThrottleWait)
	require.GreaterOrEqual(t, after.Bandwidth.BytesMoved, before.Bandwidth.BytesMoved)
	require.Equal(t, before.Streams-1, after.Streams)

	// And a stream made and closed again adds its own.
	clk.advance(time.Minute) // the buckets refill: the clock stands still otherwise
	s, err = a.NewStream(ClassDefault)
	require.NoError(t, err)
	require.NoError(t, s.Launch(ctx, fn, one, one, 0, &args))
	require.NoError(t, s.Close())
	require.EqualValues(t, after.Launches+1, a.Stats().Launches)
}

// Issue 39 #20: a nil or zero *Stream panicked on every method; Event.Since
// of nil panicked. They answer ErrInvalidArgument, or their zero values.
func TestNilAndZeroStreamsAndEvents(t *testing.T) {
	p, _ := openSim(t)
	a, err := p.NewTenant("a", WithSMs(8))
	require.NoError(t, err)
	fn := spinKernel(t, a)
	ctx := context.Background()
	one := Dim3{X: 1, Y: 1, Z: 1}
	var args Args
	args.Uint64(0)
	ev, err := a.NewEvent()
	require.NoError(t, err)
	for _, s := range []*Stream{nil, {}} {
		require.NotPanics(t, func() {
			require.ErrorIs(t, s.Launch(ctx, fn, one, one, 0, &args), ErrInvalidArgument)
			require.ErrorIs(t, s.TryLaunch(fn, one, one, 0, &args), ErrInvalidArgument)
			_, err := s.Reserve(fn, one, one)
			require.ErrorIs(t, err, ErrInvalidArgument)
			require.ErrorIs(t, s.Synchronize(), ErrInvalidArgument)
			require.ErrorIs(t, s.SynchronizeContext(ctx), ErrInvalidArgument)
			require.ErrorIs(t, s.MemsetD32(0, 0, 1), ErrInvalidArgument)
			require.ErrorIs(t, s.MemsetD16(0, 0, 1), ErrInvalidArgument)
			_, err = s.Capture(ctx, func() error { return nil })
			require.ErrorIs(t, err, ErrInvalidArgument)
			require.ErrorIs(t, s.LaunchGraph(ctx, &GraphExec{t: a.c}), ErrInvalidArgument)
			require.Zero(t, s.Handle())
			require.Zero(t, s.Launches())
			require.Equal(t, ClassDefault, s.Class())
			require.ErrorIs(t, s.Close(), ErrInvalidArgument)
			_, err = a.AllocAsync(s, 256)
			require.ErrorIs(t, err, ErrInvalidArgument)
			require.ErrorIs(t, a.FreeAsync(s, 0), ErrInvalidArgument)
		})
	}
	require.ErrorIs(t, ev.Record(&Stream{}), ErrInvalidArgument)
	require.NoError(t, ev.Record(nil), "nil is the NULL stream, as documented")
	_, err = a.AllocWorkspace(ctx, &Stream{}, 256)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.NoError(t, a.Do(ctx, func(cur Current) error {
		_, err := cur.Stream(&Stream{})
		require.ErrorIs(t, err, ErrInvalidArgument)
		return nil
	}))
	require.NotPanics(t, func() {
		_, err := ev.Since(nil)
		require.ErrorIs(t, err, ErrInvalidArgument)
	})
	require.NoError(t, ev.Close())
}

// Issue 38 #10: a Current.Workspace call after its Do named Current.Stream
// in its error.
func TestWorkspaceAfterItsDoNamesItself(t *testing.T) {
	p, _ := openSim(t)
	a, err := p.NewTenant("a", WithSMs(8))
	require.NoError(t, err)
	var kept Current
	require.NoError(t, a.Do(context.Background(), func(cur Current) error { kept = cur; return nil }))
	_, err = kept.Workspace(nil, 256)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorContains(t, err, "Current.Workspace")
	require.NotContains(t, err.Error(), "Current.Stream")
}
