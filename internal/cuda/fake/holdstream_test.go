package fake_test

import (
	"encoding/binary"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// twoPTX has two entries, so that one kernel can be held while the other
// runs.
const twoPTX = `.version 9.0
.target sm_80
.address_size 64

.visible .entry mine(.param .u64 p)
{
	ret;
}

.visible .entry other(.param .u64 p)
{
	ret;
}
`

// stall is a stall's CPU test bench: a fake with the primary context and
// the functions mine and other, each counting its runs.
type stall struct {
	drv         *fake.Driver
	ctx         cuda.Context
	mine, other cuda.Function
	mineRuns    atomic.Int32
	otherRuns   atomic.Int32
}

func newStall(t *testing.T) *stall {
	t.Helper()
	st := &stall{drv: fake.New(fake.H200())}
	var err error
	st.ctx, err = st.drv.PrimaryCtxRetain(0)
	require.NoError(t, err)
	m, err := st.drv.ModuleLoadData(st.ctx, []byte(twoPTX))
	require.NoError(t, err)
	st.mine, err = st.drv.ModuleGetFunction(st.ctx, m, "mine")
	require.NoError(t, err)
	st.other, err = st.drv.ModuleGetFunction(st.ctx, m, "other")
	require.NoError(t, err)
	st.drv.RegisterKernel("mine", func(*fake.Memory, cuda.Dim3, cuda.Dim3, []byte, []uint32) error {
		st.mineRuns.Add(1)
		return nil
	})
	st.drv.RegisterKernel("other", func(*fake.Memory, cuda.Dim3, cuda.Dim3, []byte, []uint32) error {
		st.otherRuns.Add(1)
		return nil
	})
	return st
}

// A held stream is a stalled tenant's: its work never completes (queries
// answer not ready, synchronisations wait, events recorded after the hold
// never complete, a stream that waits on one of them stalls too), and the
// launches queued on it return at once, as on a GPU. Every other stream
// keeps working. Release ends the stall: the queued work runs, in order.
func TestHeldStreamNeverCompletesOthersWork(t *testing.T) {
	st := newStall(t)
	drv, ctx := st.drv, st.ctx
	s, other, waiter := newStream(t, drv, ctx), newStream(t, drv, ctx), newStream(t, drv, ctx)
	p, err := drv.MemAlloc(ctx, 4096)
	require.NoError(t, err)
	before, err := drv.EventCreate(ctx, 0)
	require.NoError(t, err)
	require.NoError(t, drv.EventRecord(ctx, before, s))

	release, err := drv.HoldStream(s)
	require.NoError(t, err)
	require.ErrorIs(t, drv.StreamQuery(ctx, s), cuda.ErrorNotReady)
	require.NoError(t, drv.EventQuery(ctx, before), "recorded before the hold")
	require.NoError(t, within(t, time.Second, "a launch on a held stream", func() error {
		return drv.LaunchKernel(ctx, st.mine, one, one, 0, s, nil)
	}))
	require.NoError(t, drv.MemsetD32Async(ctx, p, 0xabcd, 1024, s))
	require.Zero(t, st.mineRuns.Load(), "queued behind the hold")
	after, err := drv.EventCreate(ctx, 0)
	require.NoError(t, err)
	require.NoError(t, drv.EventRecord(ctx, after, s))
	require.ErrorIs(t, drv.EventQuery(ctx, after), cuda.ErrorNotReady)
	require.NoError(t, drv.StreamWaitEvent(ctx, waiter, after))
	require.NoError(t, drv.LaunchKernel(ctx, st.other, one, one, 0, waiter, nil))

	const quiet = 30 * time.Millisecond
	synced := notWithin(t, quiet, "StreamSynchronize of a held stream", func() error { return drv.StreamSynchronize(ctx, s) })
	evSynced := notWithin(t, 0, "EventSynchronize of an event behind a hold", func() error { return drv.EventSynchronize(ctx, after) })
	ctxSynced := notWithin(t, 0, "CtxSynchronize of the held stream's context", func() error { return drv.CtxSynchronize(ctx) })
	require.ErrorIs(t, drv.StreamQuery(ctx, waiter), cuda.ErrorNotReady, "it waits on the held stream's event")
	require.Zero(t, st.otherRuns.Load())

	// Another stream keeps working, and so does the driver.
	require.NoError(t, within(t, 5*time.Second, "another stream's work", func() error {
		for range 3 {
			if err := drv.LaunchKernel(ctx, st.other, one, one, 0, other, nil); err != nil {
				return err
			}
		}
		e, err := drv.EventCreate(ctx, 0)
		if err != nil {
			return err
		}
		if err := drv.EventRecord(ctx, e, other); err != nil {
			return err
		}
		if err := drv.EventSynchronize(ctx, e); err != nil {
			return err
		}
		if err := drv.StreamQuery(ctx, other); err != nil {
			return err
		}
		if err := drv.EventDestroy(ctx, e); err != nil {
			return err
		}
		return drv.StreamSynchronize(ctx, other)
	}))
	require.Equal(t, int32(3), st.otherRuns.Load())
	require.Zero(t, st.mineRuns.Load())
	out := make([]byte, 4)
	require.NoError(t, drv.MemcpyDtoH(ctx, out, p))
	require.Equal(t, []byte{0, 0, 0, 0}, out, "the memset is queued behind the hold")

	release()
	require.NoError(t, <-synced)
	require.NoError(t, <-evSynced)
	require.NoError(t, <-ctxSynced)
	require.NoError(t, drv.StreamSynchronize(ctx, waiter))
	require.Equal(t, int32(1), st.mineRuns.Load())
	require.Equal(t, int32(4), st.otherRuns.Load())
	require.NoError(t, drv.MemcpyDtoH(ctx, out, p))
	require.Equal(t, []byte{0xcd, 0xab, 0, 0}, out)
	require.NoError(t, drv.EventQuery(ctx, after))
	release() // a second release changes nothing
	require.NoError(t, drv.StreamQuery(ctx, s))
}

// A held kernel is a kernel that never ends: its launch returns, its
// stream stalls behind it, and the same kernel launched after the release
// runs at once.
func TestHeldKernelNeverEnds(t *testing.T) {
	st := newStall(t)
	drv, ctx := st.drv, st.ctx
	s, other := newStream(t, drv, ctx), newStream(t, drv, ctx)
	release := drv.HoldKernel("mine")
	require.NoError(t, within(t, time.Second, "a held kernel's launch", func() error {
		return drv.LaunchKernel(ctx, st.mine, one, one, 0, s, nil)
	}))
	require.NoError(t, drv.LaunchKernel(ctx, st.other, one, one, 0, s, nil))
	require.ErrorIs(t, drv.StreamQuery(ctx, s), cuda.ErrorNotReady)
	synced := notWithin(t, 30*time.Millisecond, "StreamSynchronize behind a held kernel", func() error { return drv.StreamSynchronize(ctx, s) })
	require.NoError(t, drv.LaunchKernel(ctx, st.other, one, one, 0, other, nil))
	require.NoError(t, drv.StreamQuery(ctx, other))
	require.Equal(t, int32(1), st.otherRuns.Load(), "only the other stream's")
	require.Zero(t, st.mineRuns.Load())

	release()
	require.NoError(t, <-synced)
	require.Equal(t, int32(1), st.mineRuns.Load())
	require.Equal(t, int32(2), st.otherRuns.Load())
	require.NoError(t, drv.LaunchKernel(ctx, st.mine, one, one, 0, s, nil))
	require.Equal(t, int32(2), st.mineRuns.Load(), "released: it runs at once")
	require.NoError(t, drv.StreamQuery(ctx, s))
}

// spin(kernels.SpinForever) is the simulator's kernel that never ends
// (2^64 cycles on a GPU): it stalls its stream until ReleaseSpins, while
// spin of any other count ends at once.
func TestSpinForeverEndsOnlyWhenReleased(t *testing.T) {
	drv := fake.New(fake.H200())
	fake.RegisterKernels(drv)
	ctx, err := drv.PrimaryCtxRetain(0)
	require.NoError(t, err)
	m, err := drv.ModuleLoadData(ctx, kernels.ChainPTX)
	require.NoError(t, err)
	spin, err := drv.ModuleGetFunction(ctx, m, "spin")
	require.NoError(t, err)
	s := newStream(t, drv, ctx)
	var short, forever cuda.Args
	short.Uint64(1000)
	forever.Uint64(kernels.SpinForever)
	require.NoError(t, drv.LaunchKernel(ctx, spin, one, one, 0, s, &short))
	require.NoError(t, drv.StreamQuery(ctx, s))
	require.NoError(t, drv.LaunchKernel(ctx, spin, one, one, 0, s, &forever))
	require.ErrorIs(t, drv.StreamQuery(ctx, s), cuda.ErrorNotReady)
	synced := notWithin(t, 30*time.Millisecond, "StreamSynchronize behind spin forever", func() error { return drv.StreamSynchronize(ctx, s) })
	drv.ReleaseSpins()
	require.NoError(t, <-synced)
	require.NoError(t, drv.LaunchKernel(ctx, spin, one, one, 0, s, &forever))
	require.ErrorIs(t, drv.StreamQuery(ctx, s), cuda.ErrorNotReady, "a spin launched after the release never ends either")
	drv.ReleaseSpins()
	require.NoError(t, drv.StreamSynchronize(ctx, s))
}

// A reset of the device ends its stalled work, as destroying the context
// ends a kernel on a GPU: a wait on the held stream returns.
func TestResetEndsAStall(t *testing.T) {
	st := newStall(t)
	drv, ctx := st.drv, st.ctx
	s := newStream(t, drv, ctx)
	release, err := drv.HoldStream(s)
	require.NoError(t, err)
	defer release()
	require.NoError(t, drv.LaunchKernel(ctx, st.mine, one, one, 0, s, nil))
	synced := notWithin(t, 30*time.Millisecond, "StreamSynchronize of a held stream", func() error { return drv.StreamSynchronize(ctx, s) })
	require.NoError(t, drv.PrimaryCtxReset(0))
	select {
	case <-synced: // an error or nil: the stream is gone with its work
	case <-time.After(5 * time.Second):
		t.Fatal("the reset left the wait waiting")
	}
	require.Zero(t, st.mineRuns.Load(), "the reset dropped the queued kernel")
	_, err = drv.HoldStream(s)
	require.ErrorIs(t, err, cuda.ErrorInvalidHandle, "the reset destroyed the stream")
}

// A free queued behind a hold waits its turn: the kernel queued before it
// still finds its memory when the stall ends, the block is not handed out
// again meanwhile, and a second free of it is refused at once.
func TestFreeBehindAHoldWaitsItsTurn(t *testing.T) {
	st := newStall(t)
	drv, ctx := st.drv, st.ctx
	touched := atomic.Bool{}
	drv.RegisterKernel("mine", func(mem *fake.Memory, _, _ cuda.Dim3, args []byte, offs []uint32) error {
		p := cuda.DevicePtr(binary.LittleEndian.Uint64(args[offs[0]:]))
		if _, ok := mem.Slice(p, 4096); !ok {
			return errors.New("freed under the kernel")
		}
		touched.Store(true)
		return nil
	})
	s, other := newStream(t, drv, ctx), newStream(t, drv, ctx)
	pool, err := drv.MemPoolCreate(ctx, 0, 0)
	require.NoError(t, err)
	p, err := drv.MemAllocFromPoolAsync(ctx, 4096, pool, s)
	require.NoError(t, err)
	release, err := drv.HoldStream(s)
	require.NoError(t, err)
	var args cuda.Args
	args.Ptr(p)
	require.NoError(t, drv.LaunchKernel(ctx, st.mine, one, one, 0, s, &args))
	require.NoError(t, drv.MemFreeAsync(ctx, p, s))
	require.ErrorIs(t, drv.MemFreeAsync(ctx, p, s), cuda.ErrorInvalidValue, "a second free")
	q, err := drv.MemAllocFromPoolAsync(ctx, 4096, pool, other)
	require.NoError(t, err)
	require.NotEqual(t, p, q, "the block is not free until its free is reached")
	release()
	require.NoError(t, drv.StreamSynchronize(ctx, s))
	require.True(t, touched.Load())
	require.Equal(t, cuda.Success, drv.Sticky(0), "the kernel found its memory")
	r, err := drv.MemAllocFromPoolAsync(ctx, 4096, pool, other)
	require.NoError(t, err)
	require.Equal(t, p, r, "free once reached")
	require.NoError(t, drv.MemFreeAsync(ctx, q, other))
	require.NoError(t, drv.MemFreeAsync(ctx, r, other))
	require.NoError(t, drv.MemPoolDestroy(ctx, pool))
}
