package fcsp

import (
	"context"
	"encoding/binary"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// smidProbePTX: smid(u32 *out, u64 cycles): each block writes its %smid at
// out[blockIdx.x] (the fake models it: fake.SMIDKernel).
const smidProbePTX = `.version 8.0
.target sm_90
.address_size 64
.visible .entry smid(.param .u64 out, .param .u64 cycles) {
 .reg .b32 %r<3>; .reg .b64 %rd<4>;
 ld.param.u64 %rd1, [out]; cvta.to.global.u64 %rd1, %rd1;
 mov.u32 %r1, %smid; mov.u32 %r2, %ctaid.x; mul.wide.u32 %rd3, %r2, 4;
 add.s64 %rd2, %rd1, %rd3; st.global.u32 [%rd2], %r1; ret;
}`

// smsOf runs the %smid probe on s (a stream of tn) through the tenant's
// public calls, 4 blocks per SM of the device, and lists the SMs its blocks
// ran on.
func smsOf(t *testing.T, tn *Tenant, s *Stream) []int {
	t.Helper()
	mod, err := tn.LoadModule([]byte(smidProbePTX))
	require.NoError(t, err)
	fn, err := mod.Function("smid")
	require.NoError(t, err)
	blocks := 4 * tn.Pool().Device().SMs
	buf, err := tn.Alloc(context.Background(), uint64(4*blocks))
	require.NoError(t, err)
	defer func() { require.NoError(t, tn.Free(buf)) }()
	var args Args
	args.Ptr(buf).Uint64(2000)
	require.NoError(t, s.Launch(context.Background(), fn, Dim3{X: uint32(blocks), Y: 1, Z: 1}, Dim3{X: 32, Y: 1, Z: 1}, 0, &args))
	require.NoError(t, s.Synchronize())
	host := make([]byte, 4*blocks)
	require.NoError(t, tn.CopyFromDevice(host, buf))
	var out []int
	for i := range blocks {
		out = append(out, int(binary.LittleEndian.Uint32(host[4*i:])))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func overlap(a, b []int) []int {
	var out []int
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// Issue 37. A plain tenant beside a partition runs on the SMs no partition
// holds, never on the partition's: before the commons it ran on all 132,
// the partition's 16 among them, and this test failed.
func TestPlainTenantStaysOffThePartitions(t *testing.T) {
	p, _ := openSim(t)
	inter, err := p.NewTenant("interactive", WithSMs(16), WithReshapeSizes(16, 32))
	require.NoError(t, err)
	batch, err := p.NewTenant("batch") // no SM option
	require.NoError(t, err)
	own := smsOf(t, inter, inter.Stream())
	require.Len(t, own, 16)
	plain := smsOf(t, batch, batch.Stream())
	require.Empty(t, overlap(plain, own), "the plain tenant ran on the partition's SMs")
	require.Len(t, plain, 132-16, "every SM no partition holds, the split's remainder included")

	// A stream made later, and the work after a Reshape of the partition:
	// off its SMs, whichever way it moves.
	s, err := batch.NewStream(ClassDefault)
	require.NoError(t, err)
	defer s.Close()
	for _, sms := range []int{32, 16} {
		require.NoError(t, inter.Reshape(context.Background(), sms))
		own = smsOf(t, inter, inter.Stream())
		require.Len(t, own, sms)
		for _, st := range []*Stream{batch.Stream(), s} {
			plain = smsOf(t, batch, st)
			require.Empty(t, overlap(plain, own), "after the reshape to %d", sms)
			require.Len(t, plain, 132-sms)
		}
	}
}

// The commons follows the partitions both ways: a partition made moves
// the plain tenants off its SMs, one closed gives them back, and with no
// partition left they are on the whole device again, in the primary
// context, holding no green context.
func TestCommonsFollowsThePartitions(t *testing.T) {
	p, drv := openSim(t)
	plain, err := p.NewTenant("plain")
	require.NoError(t, err)
	require.Equal(t, 132, plain.SMs())
	require.Zero(t, drv.Live().GreenCtxs, "no partition: the whole device, no green context")
	a, err := p.NewTenant("a", WithSMs(16))
	require.NoError(t, err)
	require.Equal(t, 116, plain.SMs())
	b, err := p.NewTenant("b", WithSMs(32))
	require.NoError(t, err)
	require.Equal(t, 84, plain.SMs())
	got := smsOf(t, plain, plain.Stream())
	require.Len(t, got, 84)
	require.Empty(t, overlap(got, smsOf(t, a, a.Stream())))
	require.Empty(t, overlap(got, smsOf(t, b, b.Stream())))

	r, err := p.ProbeSMs(context.Background())
	require.NoError(t, err)
	require.True(t, r.Confined(), "%v", r.Breaches)
	require.Len(t, r.SMs["plain"], 84)
	require.Len(t, r.SMs["a"], 16)

	require.NoError(t, a.Close())
	require.Equal(t, 100, plain.SMs(), "a closed partition's SMs return to the commons")
	require.NoError(t, b.Close())
	require.Equal(t, 132, plain.SMs())
	require.Len(t, smsOf(t, plain, plain.Stream()), 132)
	requireNoGreenHeld(t, p, drv) // back on the whole device the commons holds none
}

// Where no SM is free, unpartitioned tenants share the rest's SMs
// (WithRestOfSMs), never a sized partition's; with no rest to share, a
// change that would leave them none is refused, naming the way out.
func TestCommonsWhenNoSMIsFree(t *testing.T) {
	p, _ := openSim(t)
	lat, err := p.NewTenant("lat", WithSMs(16))
	require.NoError(t, err)
	rest, err := p.NewTenant("rest", WithRestOfSMs())
	require.NoError(t, err)
	plain, err := p.NewTenant("plain")
	require.NoError(t, err)
	require.Equal(t, 116, plain.SMs())
	got := smsOf(t, plain, plain.Stream())
	require.Empty(t, overlap(got, smsOf(t, lat, lat.Stream())))
	require.Equal(t, smsOf(t, rest, rest.Stream()), got)
	r, err := p.ProbeSMs(context.Background())
	require.NoError(t, err)
	require.True(t, r.Confined(), "sharing the rest is no breach: %v", r.Breaches)
	require.NoError(t, rest.Close())
	require.NoError(t, lat.Close())

	// Sized partitions over every group leave the remainder; taking that
	// too would leave the plain tenant nothing.
	all, err := p.NewTenant("all", WithSMs(120))
	require.NoError(t, err)
	require.Equal(t, 12, plain.SMs(), "the split's remainder")
	_, err = p.NewTenant("rem", WithRemainderSMs())
	require.ErrorIs(t, err, ErrInsufficientSMs)
	require.ErrorContains(t, err, "WithRestOfSMs")
	require.Equal(t, 12, plain.SMs(), "the refusal changed nothing")
	require.NoError(t, plain.Close())
	rem, err := p.NewTenant("rem", WithRemainderSMs())
	require.NoError(t, err, "with no unpartitioned tenant, every SM may go to partitions")
	_, err = p.NewTenant("late")
	require.ErrorIs(t, err, ErrInsufficientSMs, "no SM left for an unpartitioned tenant")
	require.NoError(t, rem.Close())
	require.NoError(t, all.Close())
}

// A graph an unpartitioned tenant captured runs on the SMs of its context
// then: once a partition has moved the commons, it is refused as a stale
// partition's graph is, and captured again it runs off the partition.
func TestCommonsGraphGoesStale(t *testing.T) {
	p, _ := openSim(t)
	plain, err := p.NewTenant("plain")
	require.NoError(t, err)
	s := plain.Stream()
	g, err := s.Capture(context.Background(), func() error { return nil })
	require.NoError(t, err)
	e, err := g.Instantiate()
	require.NoError(t, err)
	require.NoError(t, s.LaunchGraph(context.Background(), e))
	a, err := p.NewTenant("a", WithSMs(16))
	require.NoError(t, err)
	require.ErrorIs(t, s.LaunchGraph(context.Background(), e), ErrStaleGraph)
	g2, err := s.Capture(context.Background(), func() error { return nil })
	require.NoError(t, err)
	e2, err := g2.Instantiate()
	require.NoError(t, err)
	require.NoError(t, s.LaunchGraph(context.Background(), e2))
	// A Stream does not keep its tenant reachable: unheld, either tenant
	// could be collected and closed mid-test (plain's Close made the last
	// launch ErrClosed in a full run of the package).
	runtime.KeepAlive(plain)
	runtime.KeepAlive(a)
}

// Moving the commons waits for the unpartitioned tenants' calls in flight,
// so from inside one of their Dos it would wait for itself: refused with
// ErrInsideDo; a partition closed there leaves the commons to the next
// change rather than wait.
func TestCommonsMoveFromInsideAPlainDo(t *testing.T) {
	p, _ := openSim(t)
	plain, err := p.NewTenant("plain")
	require.NoError(t, err)
	a, err := p.NewTenant("a", WithSMs(16))
	require.NoError(t, err)
	require.NoError(t, plain.Do(context.Background(), func(Current) error {
		_, err := p.NewTenant("b", WithSMs(16))
		require.ErrorIs(t, err, ErrInsideDo)
		require.NoError(t, a.Close())
		return nil
	}))
	require.Equal(t, 116, plain.SMs(), "not moved from inside the Do")
	b, err := p.NewTenant("b", WithSMs(16))
	require.NoError(t, err)
	require.Equal(t, 116, plain.SMs(), "the next change moved it")
	require.Len(t, smsOf(t, plain, plain.Stream()), 116)
	require.Empty(t, overlap(smsOf(t, plain, plain.Stream()), smsOf(t, b, b.Stream())))
}

// Every call of unpartitioned tenants races partitions being made, closed
// and reshaped (each of which moves the commons), and plain tenants being
// made and closed: nothing fails but with its documented error, nothing
// hangs, and once the churn stops every plain tenant's work runs off every
// partition. Run with -race -count=20.
func TestCommonsMovesRaceEveryCall(t *testing.T) {
	p, drv := openSim(t)
	ctx := context.Background()
	plains := make([]*Tenant, 3)
	for i := range plains {
		var err error
		plains[i], err = p.NewTenant("plain" + string(rune('a'+i)))
		require.NoError(t, err)
	}
	stop := make(chan struct{})
	ok := func(err error) bool {
		return err == nil || errors.Is(err, ErrClosed) || errors.Is(err, ErrInsufficientSMs) || errors.Is(err, ErrStaleGraph)
	}
	var wg sync.WaitGroup
	for _, tn := range plains {
		mod, err := tn.LoadModule([]byte(smidProbePTX))
		require.NoError(t, err)
		fn, err := mod.Function("smid")
		require.NoError(t, err)
		buf, err := tn.Alloc(ctx, 4*4*132)
		require.NoError(t, err)
		var args Args
		args.Ptr(buf).Uint64(1)
		wg.Go(func() { // Do, and launches on the first stream
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := tn.Do(ctx, func(cur Current) error {
					s, err := cur.Stream(tn.Stream())
					if err != nil {
						return err
					}
					_ = s
					return nil
				})
				require.True(t, ok(err), "Do: %v", err)
				err = tn.Stream().Launch(ctx, fn, Dim3{X: 4 * 132, Y: 1, Z: 1}, Dim3{X: 32, Y: 1, Z: 1}, 0, &args)
				require.True(t, ok(err), "Launch: %v", err)
			}
		})
		wg.Go(func() { // streams made, used and closed
			for {
				select {
				case <-stop:
					return
				default:
				}
				s, err := tn.NewStream(ClassDefault)
				require.True(t, ok(err), "NewStream: %v", err)
				if err != nil {
					continue
				}
				require.True(t, ok(s.Synchronize()))
				require.NoError(t, s.Close())
			}
		})
	}
	wg.Go(func() { // plain tenants made and closed
		for {
			select {
			case <-stop:
				return
			default:
			}
			tn, err := p.NewTenant("churn")
			require.True(t, ok(err), "NewTenant plain: %v", err)
			if err == nil {
				require.NoError(t, tn.Close())
			}
		}
	})
	for i := range 30 { // partitions made, reshaped and closed
		a, err := p.NewTenant("a", WithSMs(16), WithReshapeSizes(16, 32, 48))
		require.NoError(t, err)
		require.NoError(t, a.Reshape(ctx, 16*(1+i%3)))
		b, err := p.NewTenant("b", WithSMs(8*(1+i%3)))
		require.NoError(t, err)
		require.NoError(t, b.Close())
		require.NoError(t, a.Reshape(ctx, 16))
		if i%2 == 0 {
			require.NoError(t, a.Close())
			continue
		}
		defer a.Close()
		break
	}
	close(stop)
	wg.Wait()
	r, err := p.ProbeSMs(ctx)
	require.NoError(t, err)
	require.True(t, r.Confined(), "%v", r.Breaches)
	for _, tn := range plains {
		require.Len(t, r.SMs[tn.Name()], 132-16)
	}
	require.Zero(t, drv.Overlaps(), "a green context of the commons was current on two threads")
}

// TestGPUShutdownOrder's shape on the simulator: a partition and two plain
// tenants (one pooled) closed by their contexts racing the pool's Close,
// ten times: nothing of the driver's is left, the commons' green contexts
// and streams included.
func TestCommonsLeavesNothingAtShutdown(t *testing.T) {
	for round := range 10 {
		p, err := openSimErr(0)
		require.NoError(t, err)
		drv := simFake(p)
		var cancels []context.CancelFunc
		for i, opts := range [][]TenantOption{{WithSMs(16)}, {}, {WithMemoryPool(0), WithMemoryQuota(1 << 30)}} {
			ctx, cancel := context.WithCancel(context.Background())
			cancels = append(cancels, cancel)
			tn, err := p.NewTenant(string(rune('a'+i)), append(opts, WithContext(ctx))...)
			require.NoError(t, err)
			for range 8 {
				ptr, err := tn.Alloc(context.Background(), 32<<20)
				require.NoError(t, err)
				if i == 2 {
					require.NoError(t, tn.Free(ptr))
				}
			}
		}
		for _, c := range cancels {
			c()
		}
		require.NoError(t, p.Close(), "round %d", round)
		live := drv.Live()
		require.Zero(t, live.GreenCtxs, "round %d: %+v", round, live)
		require.Zero(t, live.Streams, "round %d: %+v", round, live)
		require.Zero(t, live.Events, "round %d: %+v", round, live)
		require.Zero(t, live.Bytes, "round %d: %+v", round, live)
		require.Zero(t, live.Modules, "round %d: %+v", round, live)
		require.Zero(t, live.Contexts, "round %d: %+v", round, live)
		require.Zero(t, live.PrimaryRefs, "round %d: %+v", round, live)
	}
}

// A plain tenant whose Close waits for its Do cannot be held back by a
// move of the commons: the move leaves the layout its streams are on,
// which its Close still synchronises and releases, and the pool's Close
// lets it go. (Here the Do's slot also keeps that layout; the move keeps it
// too where no Do holds one, as in TestGPUShutdownOrder's closes.)
func TestCommonsMoveLeavesAClosingTenantsStreams(t *testing.T) {
	p, drv := openSim(t)
	a, err := p.NewTenant("a", WithSMs(16))
	require.NoError(t, err)
	b, err := p.NewTenant("b")
	require.NoError(t, err)
	s, err := b.NewStream(ClassDefault)
	require.NoError(t, err)
	require.NoError(t, s.Synchronize())
	in, release := make(chan struct{}), make(chan struct{})
	go func() {
		_ = b.Do(context.Background(), func(Current) error { close(in); <-release; return nil })
	}()
	<-in
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	for !b.c.closed.Load() {
		time.Sleep(100 * time.Microsecond)
	}
	require.NoError(t, a.Close()) // moves the commons to the whole device
	close(release)
	require.NoError(t, <-closed)
	require.NoError(t, p.Close())
	require.Zero(t, drv.Live().GreenCtxs)
	require.Zero(t, drv.Live().Streams)
}
