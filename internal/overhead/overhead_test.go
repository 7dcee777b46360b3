package overhead

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/kernels"
	"github.com/fcsp-go/fcsp-go/memtrack"
)

// rig is a fake device behind a meter: its primary context, a descriptor
// of all its SMs, and the tracker the meter charges.
type rig struct {
	f    *fake.Driver
	m    *Meter
	d    cuda.Driver
	ctx  cuda.Context
	desc cuda.ResourceDesc
}

func newRig(t *testing.T, greens int) *rig {
	t.Helper()
	r := &rig{f: fake.New(fake.H200()), m: &Meter{}}
	if greens > 0 {
		r.m.SetGreenLimit(greens)
	}
	g := cuda.NewGuard(r.f, nopWatch{})
	g.SetMaker(r.m)
	r.d = g
	var err error
	r.ctx, err = r.d.PrimaryCtxRetain(0)
	require.NoError(t, err)
	res, err := r.d.DeviceGetDevResource(0, cuda.ResourceSM)
	require.NoError(t, err)
	r.desc, err = r.d.DevResourceGenerateDesc([]cuda.DevResource{res})
	require.NoError(t, err)
	return r
}

func (r *rig) green(t *testing.T) cuda.GreenCtx {
	t.Helper()
	g, err := r.d.GreenCtxCreate(r.desc, 0, cuda.GreenCtxDefaultStream)
	require.NoError(t, err)
	return g
}

// Each kind is counted and charged; what the device holds of them is what
// the meter says (the fake holds each cost as the driver would), before
// and after they are destroyed, a green context's memory outliving it.
func TestMeterCountsWhatTheDeviceHolds(t *testing.T) {
	r := newRig(t, 0)
	base := r.f.ProcessMemory()
	s0, err := r.d.StreamCreate(r.ctx, cuda.StreamNonBlocking) // made before Bind: charged by it
	require.NoError(t, err)
	tr, err := memtrack.New(1 << 30)
	require.NoError(t, err)
	require.NoError(t, r.m.Bind(tr))
	require.Equal(t, cuda.StreamCost, tr.Used(), "Bind charges what was made before it")

	g := r.green(t)
	s1, err := r.d.GreenCtxStreamCreate(g, cuda.StreamNonBlocking, 0)
	require.NoError(t, err)
	ev, err := r.d.EventCreate(r.ctx, cuda.EventDefault)
	require.NoError(t, err)
	mod, err := r.d.ModuleLoadData(r.ctx, kernels.ChainPTX)
	require.NoError(t, err)
	f := r.m.Read()
	want := Figures{GreenContexts: cuda.GreenCtxCost, Streams: 2 * cuda.StreamCost, Events: cuda.EventCost,
		Modules: cuda.ModuleCost(len(kernels.ChainPTX)), GreenMade: 1, GreenLive: 1, StreamsLive: 2, EventsLive: 1, ModulesLive: 1}
	want.Bytes = want.GreenContexts + want.Streams + want.Events + want.Modules
	require.Equal(t, want, f)
	require.Equal(t, f.Bytes, tr.Used(), "every byte charged against the device limit")
	require.Equal(t, f.Bytes, r.f.ProcessMemory()-base, "the device holds what the meter counts")

	require.NoError(t, r.d.StreamDestroy(r.ctx, s1))
	require.NoError(t, r.d.GreenCtxDestroy(g))
	require.NoError(t, r.d.EventDestroy(r.ctx, ev))
	require.NoError(t, r.d.ModuleUnload(r.ctx, mod))
	require.NoError(t, r.d.StreamDestroy(r.ctx, s0))
	f = r.m.Read()
	require.Equal(t, Figures{Bytes: cuda.GreenCtxCost, GreenContexts: cuda.GreenCtxCost, GreenMade: 1}, f,
		"a destroyed green context's memory stays with the primary context; the others' goes")
	require.Equal(t, f.Bytes, tr.Used())
	require.Equal(t, f.Bytes, r.f.ProcessMemory()-base)
	require.Equal(t, f.Bytes, r.m.Charged())
}

// An object the device limit has no room for is refused before the
// driver is asked, with the limit's QuotaError, and changes nothing.
func TestMeterRefusesAtTheDeviceLimit(t *testing.T) {
	r := newRig(t, 0)
	tr, err := memtrack.New(cuda.GreenCtxCost + cuda.StreamCost)
	require.NoError(t, err)
	require.NoError(t, r.m.Bind(tr))
	r.green(t)
	live := r.f.Live()
	_, err = r.d.GreenCtxCreate(r.desc, 0, cuda.GreenCtxDefaultStream)
	require.ErrorIs(t, err, memtrack.ErrQuotaExceeded)
	require.ErrorIs(t, err, errs.ErrQuotaExceeded)
	var qe *memtrack.QuotaError
	require.True(t, errors.As(err, &qe))
	require.Equal(t, memtrack.ScopeDevice, qe.Scope)
	require.Contains(t, err.Error(), "a green context holds 4 MiB")
	require.Equal(t, live, r.f.Live(), "the driver was not asked")
	_, err = r.d.StreamCreate(r.ctx, cuda.StreamNonBlocking)
	require.NoError(t, err, "a stream fits in what is left")
	_, err = r.d.StreamCreate(r.ctx, cuda.StreamNonBlocking)
	require.ErrorIs(t, err, memtrack.ErrQuotaExceeded)
	require.Equal(t, Figures{Bytes: cuda.GreenCtxCost + cuda.StreamCost, GreenContexts: cuda.GreenCtxCost, Streams: cuda.StreamCost,
		GreenMade: 1, GreenLive: 1, StreamsLive: 1}, r.m.Read())
	require.Equal(t, tr.Limit(), tr.Used())
}

// The bound on green contexts counts every one made, destroyed ones
// included (their memory stays), and refuses the next with
// ErrGreenContextLimit, saying what to change; a failed creation is not
// counted.
func TestMeterBoundsGreenContexts(t *testing.T) {
	r := newRig(t, 2)
	r.f.FailNext("cuGreenCtxCreate", cuda.ErrorOutOfMemory)
	_, err := r.d.GreenCtxCreate(r.desc, 0, cuda.GreenCtxDefaultStream)
	require.ErrorIs(t, err, cuda.ErrorOutOfMemory)
	require.Zero(t, r.m.Read().GreenMade, "the driver's failure made nothing")
	require.NoError(t, r.d.GreenCtxDestroy(r.green(t)))
	r.green(t)
	_, err = r.d.GreenCtxCreate(r.desc, 0, cuda.GreenCtxDefaultStream)
	require.ErrorIs(t, err, errs.ErrGreenContextLimit)
	require.Contains(t, err.Error(), "made 2, its WithGreenContextLimit")
	require.Contains(t, err.Error(), "WithConcurrentDos")
	f := r.m.Read()
	require.Equal(t, 2, f.GreenMade)
	require.Equal(t, 1, f.GreenLive)
	require.Equal(t, 2, f.GreenLimit)
	require.Equal(t, 1, r.f.Live().GreenCtxs)
}

// Creations and destructions from many goroutines at once at the bound:
// never more made than the bound, and the counts add up (go test -race).
func TestMeterConcurrently(t *testing.T) {
	const bound = 40
	r := newRig(t, bound)
	tr, err := memtrack.New(1 << 40)
	require.NoError(t, err)
	require.NoError(t, r.m.Bind(tr))
	var wg sync.WaitGroup
	var mu sync.Mutex
	made := 0
	for range 8 {
		wg.Go(func() {
			for range 10 {
				g, err := r.d.GreenCtxCreate(r.desc, 0, cuda.GreenCtxDefaultStream)
				if errors.Is(err, errs.ErrGreenContextLimit) {
					continue
				}
				if !assertNoError(t, err) {
					return
				}
				mu.Lock()
				made++
				mu.Unlock()
				s, err := r.d.GreenCtxStreamCreate(g, cuda.StreamNonBlocking, 0)
				if !assertNoError(t, err) {
					return
				}
				assertNoError(t, r.d.StreamDestroy(r.ctx, s))
				assertNoError(t, r.d.GreenCtxDestroy(g))
			}
		})
	}
	wg.Wait()
	require.Equal(t, bound, made)
	f := r.m.Read()
	require.Equal(t, Figures{Bytes: bound * cuda.GreenCtxCost, GreenContexts: bound * cuda.GreenCtxCost, GreenMade: bound, GreenLimit: bound}, f)
	require.Equal(t, f.Bytes, tr.Used())
}

func assertNoError(t *testing.T, err error) bool {
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}

type nopWatch struct{}

func (nopWatch) Refuse(string) error                                          { return nil }
func (nopWatch) See(_ string, _ cuda.Context, _ cuda.Stream, err error) error { return err }
