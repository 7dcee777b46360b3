package smprobe_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/internal/devmem"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
	"github.com/fcsp-go/fcsp-go/internal/smprobe"
	"github.com/fcsp-go/fcsp-go/memtrack"
)

// owner is a tenant of the test's that is never closed.
type owner struct{ calls int }

func (o *owner) Enter() (uint32, error)         { o.calls++; return 0, nil }
func (o *owner) Exit(uint32)                    { o.calls-- }
func (o *owner) TryEnter() (uint32, bool)       { o.calls++; return 0, true }
func (o *owner) Streams() []devmem.Stream       { return nil }
func (o *owner) ReleaseStreams([]devmem.Stream) {}
func (o *owner) Log(string)                     {}

// stream is a stream of the primary context's.
type stream struct {
	drv    *fake.Driver
	dev    *smpart.Device
	h      cuda.Stream
	blocks devmem.Blocks
}

func (s *stream) Handle() cuda.Stream    { return s.h }
func (s *stream) Blocks() *devmem.Blocks { return &s.blocks }
func (s *stream) Capturing() bool        { return false }
func (s *stream) Idle() bool             { return true }
func (s *stream) Synchronize() error     { return s.drv.StreamSynchronize(s.dev.Primary(), s.h) }
func (s *stream) Wait() error            { return s.Synchronize() }
func (s *stream) Launch(fn cuda.Function, grid, block cuda.Dim3, args *cuda.Args) error {
	return s.drv.LaunchKernel(s.dev.Primary(), fn, grid, block, 0, s.h, args)
}

// The probe on a stream of the whole device's runs on every SM, and gives
// its output back to the tenant's account.
func TestRun(t *testing.T) {
	drv := fake.New(fake.H200())
	fake.RegisterKernels(drv)
	dev, err := smpart.Open(drv, 0)
	require.NoError(t, err)
	defer dev.Close()
	var k smprobe.Kernel
	fn, err := k.Function(dev)
	require.NoError(t, err)
	defer k.Close(dev)
	tracker, err := memtrack.New(1<<30, memtrack.WithLeaseChunk(0))
	require.NoError(t, err)
	acct, err := tracker.NewAccount("a", 1<<20)
	require.NoError(t, err)
	o := &owner{}
	mem := devmem.NewPlain(devmem.Config{Driver: drv, Device: dev, Account: acct, Tracker: tracker,
		Peers: &devmem.Peers{}, Info: &devmem.InfoCache{}, Owner: o})
	h, err := drv.StreamCreate(dev.Primary(), cuda.StreamNonBlocking)
	require.NoError(t, err)
	defer drv.StreamDestroy(dev.Primary(), h)
	sms, err := smprobe.Run(mem, &stream{drv: drv, dev: dev, h: h}, fn, 132)
	require.NoError(t, err)
	require.Len(t, sms, 132)
	require.Zero(t, acct.Used(), "the output is freed")
	require.Zero(t, o.calls, "each call counted out")
}

// surveyed is a tenant whose probe answers sms or err.
type surveyed struct {
	own smprobe.Owner
	sms []int
	err error
}

func (s *surveyed) Owner() smprobe.Owner               { return s.own }
func (s *surveyed) Probe(cuda.Function) ([]int, error) { return s.sms, s.err }
func (s *surveyed) Fail(op string, err error) error {
	return fmt.Errorf("%s %s: %w", s.own.Name, op, err)
}

// A survey reports each tenant's SMs and the breaches among them; a tenant
// closed meanwhile is left out, another's failure named as its own; an
// ended ctx stops it with what it found.
func TestSurvey(t *testing.T) {
	bad := errors.New("bad")
	tenants := []smprobe.Tenant{
		&surveyed{own: smprobe.Owner{Name: "a", Partitioned: true}, sms: []int{0, 1, 2}},
		&surveyed{own: smprobe.Owner{Name: "b"}, sms: []int{2, 3}},
		&surveyed{own: smprobe.Owner{Name: "gone"}, err: errs.ErrClosed},
		&surveyed{own: smprobe.Owner{Name: "c"}, err: bad},
	}
	name := func(s string) string { return fmt.Sprintf("tenant %q", s) }
	sms, breaches, err := smprobe.Survey(context.Background(), 0, tenants, "Pool.ProbeSMs", name)
	require.Equal(t, map[string][]int{"a": {0, 1, 2}, "b": {2, 3}}, sms)
	require.Equal(t, []string{`tenant "b" ran on 1 SMs of tenant "a"'s partition`}, breaches)
	require.ErrorIs(t, err, bad)
	require.EqualError(t, err, "c Pool.ProbeSMs: bad")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sms, breaches, err = smprobe.Survey(ctx, 0, tenants, "Pool.ProbeSMs", name)
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, sms)
	require.Nil(t, breaches)
}
