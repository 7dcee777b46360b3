package config

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
	"github.com/fcsp-go/fcsp-go/stream"
	"github.com/fcsp-go/fcsp-go/tokenbucket"
	"github.com/stretchr/testify/require"
)

// TestSettersRefuse: every setter refuses what is out of range with
// ErrInvalidArgument, a message naming the value and what is allowed, and
// leaves the configuration as it was.
func TestSettersRefuse(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		set  func(*Pool, *Tenant) error
		msg  string
	}{
		{"unit 0", func(p *Pool, _ *Tenant) error { return p.SetPartitionUnit(0) }, "partition unit 0 SMs; want a positive SM count"},
		{"prewarm -8", func(p *Pool, _ *Tenant) error { return p.AddPrewarm([]int{8, -8}) }, "prewarm size -8 SMs; want positive SM counts"},
		{"memory limit 0", func(p *Pool, _ *Tenant) error { return p.SetMemLimit(0) }, "device memory limit 0; want a positive byte count"},
		{"dampening NaN", func(p *Pool, _ *Tenant) error { return p.SetDampening(math.NaN()) }, "dampening NaN; want a number in (0, 1]"},
		{"dampening 1.5", func(p *Pool, _ *Tenant) error { return p.SetDampening(1.5) }, "dampening 1.5; want a number in (0, 1]"},
		{"penalty -2", func(p *Pool, _ *Tenant) error { return p.SetPenalty(-2) }, "throttle penalty -2; want a finite number >= 0, or NoThrottlePenalty"},
		{"penalty +Inf", func(p *Pool, _ *Tenant) error { return p.SetPenalty(math.Inf(1)) }, "throttle penalty +Inf; want a finite number >= 0, or NoThrottlePenalty"},
		{"refill 0", func(p *Pool, _ *Tenant) error { return p.SetRefill(0) }, "refill period 0s; want a positive duration"},
		{"host wait -2ns", func(p *Pool, _ *Tenant) error { return p.SetHostWait(-2) }, "WithHostWait(-2ns); want a spin of 0 or more, or SpinInDriver"},
		{"region empty", func(p *Pool, _ *Tenant) error { return p.SetRegion("") }, "empty shared region path"},
		{"region dir", func(p *Pool, _ *Tenant) error { return p.SetRegion(dir) }, "is a directory; give a file in it"},
		{"region no folder", func(p *Pool, _ *Tenant) error { return p.SetRegion(filepath.Join(dir, "no", "fcsp")) }, "does not exist"},
		// Issue 58 #9: refused when the option is made, not by Open's OS call.
		{"region NUL", func(p *Pool, _ *Tenant) error { return p.SetRegion(filepath.Join(dir, "a\x00b")) }, "holds a NUL byte"},
		{"region relative", func(p *Pool, _ *Tenant) error { return p.SetRegion("region") }, `shared region path "region" is not absolute`},
		{"region relative dot", func(p *Pool, _ *Tenant) error { return p.SetRegion("./x/../region") }, "is not absolute"},
		{"region name past NAME_MAX", func(p *Pool, _ *Tenant) error { return p.SetRegion(filepath.Join(dir, strings.Repeat("n", 256))) }, "a name of 256 bytes; the OS takes names of at most 255"},
		{"region 10 kB name", func(p *Pool, _ *Tenant) error { return p.SetRegion(filepath.Join(dir, strings.Repeat("n", 10000))) }, "the OS takes paths of at most 4095"},
		{"region path past PATH_MAX", func(p *Pool, _ *Tenant) error {
			return p.SetRegion(strings.Repeat("/"+strings.Repeat("d", 200), 21))
		}, "path of 4221 bytes; the OS takes paths of at most 4095"},
		{"heartbeat timeout <= every", func(p *Pool, _ *Tenant) error { return p.SetHeartbeat(time.Second, time.Second) }, "heartbeat every 1s, timeout 1s; want 1ms <= every < timeout"},
		{"heartbeat 1ns", func(p *Pool, _ *Tenant) error { return p.SetHeartbeat(time.Nanosecond, time.Second) }, "heartbeat every 1ns, timeout 1s; want 1ms <= every < timeout"},
		{"green contexts 0", func(p *Pool, _ *Tenant) error { return p.SetGreenLimit(0) }, "WithGreenContextLimit(0); want at least 1"},
		{"sampling -1s", func(p *Pool, _ *Tenant) error { return p.SetSample(-time.Second) }, "WithMemorySampling(-1s); want 0 (off) or 1ms or more"},
		{"sampling 1us", func(p *Pool, _ *Tenant) error { return p.SetSample(time.Microsecond) }, "WithMemorySampling(1µs)"},
		{"unaccounted 0", func(p *Pool, _ *Tenant) error { return p.SetUnaccounted(0) }, "WithUnaccountedMemoryBound(0); want a positive byte count"},
		{"dos 0", func(_ *Pool, c *Tenant) error { return c.SetConcurrentDos(0) }, "WithConcurrentDos(0); want 1 to 64"},
		{"dos past max", func(_ *Pool, c *Tenant) error { return c.SetConcurrentDos(smpart.MaxSlots + 1) }, "WithConcurrentDos(65)"},
		{"nil context", func(_ *Pool, c *Tenant) error { return c.SetContext(nil) }, "WithContext of a nil context.Context"},
		{"SMs -8", func(_ *Pool, c *Tenant) error { return c.SetSMs(-8) }, "WithSMs(-8); want a positive multiple of the partition unit"},
		{"quota 0", func(_ *Pool, c *Tenant) error { return c.SetQuota(0) }, "memory quota 0; want a positive byte count"},
		{"SM limit 0", func(_ *Pool, c *Tenant) error { return c.SetSMLimit(0) }, "SM limit 0; want a fraction in (0, 1]"},
		{"class past the last", func(_ *Pool, c *Tenant) error { return c.SetClass(stream.Class(99)) }, "stream class"},
		{"SM share 2", func(_ *Pool, c *Tenant) error { return c.SetSMShare(2) }, "SM share 2; want a fraction in (0, 1]"},
		{"priority 7", func(_ *Pool, c *Tenant) error { return c.SetPriority(7) }, "priority Priority(7); want fcsp.Normal or fcsp.LatencyCritical"},
		{"floor NaN", func(_ *Pool, c *Tenant) error { return c.SetFloor(math.NaN()) }, "bandwidth floor NaN; want a fraction in (0, 1]"},
		{"reshape none", func(_ *Pool, c *Tenant) error { return c.AddReshapeSizes(nil) }, "WithReshapeSizes with no sizes"},
		{"reshape 0", func(_ *Pool, c *Tenant) error { return c.AddReshapeSizes([]int{16, 0}) }, "reshape size 0 SMs; want positive SM counts"},
		{"tenant refill -1s", func(_ *Pool, c *Tenant) error { return c.SetRefill(-time.Second) }, "refill period -1s; want a positive duration"},
		{"GPU share 0", func(_ *Pool, c *Tenant) error { return c.SetGPUShare(0) }, "GPU share 0; want a fraction in (0, 1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, c := NewPool(), Tenant{}
			err := tc.set(&p, &c)
			require.ErrorIs(t, err, errs.ErrInvalidArgument)
			require.Contains(t, err.Error(), tc.msg)
			require.Equal(t, NewPool().Dampening, p.Dampening)
			require.Zero(t, p.Unit+len(p.Prewarm)+int(p.MemLimit)+int(p.Refill)+int(p.Beat))
			require.False(t, p.HostWaitSet)
			require.Empty(t, p.Region)
			require.Zero(t, c.Dos+c.SMs+len(c.Shape.Sizes)+int(c.Quota)+int(c.Refill))
			require.Zero(t, c.SMLimit+c.Shape.Share+c.Prio.Floor+c.GPUShare)
			require.Nil(t, c.Ctx)
			require.False(t, c.Metered)
		})
	}
}

// TestSetTuning: WithLimiterTuning's zero fields keep the defaults, set
// ones are kept, NoPenalty turns the penalty off, and a field out of range
// is refused with its message.
func TestSetTuning(t *testing.T) {
	p := NewPool()
	require.NoError(t, p.SetTuning(0, 0, 0))
	require.Equal(t, NewPool(), p, "a zero LimiterTuning changes nothing")
	require.NoError(t, p.SetTuning(2*time.Millisecond, 0.5, 3))
	require.Equal(t, 2*time.Millisecond, p.Refill)
	require.Equal(t, 0.5, p.Dampening)
	require.Equal(t, 3.0, p.Penalty)
	require.NoError(t, p.SetTuning(0, 0, tokenbucket.NoPenalty))
	require.Equal(t, tokenbucket.NoPenalty, p.Penalty)
	require.Equal(t, 2*time.Millisecond, p.Refill, "a later zero field keeps what an earlier option set")
	require.Equal(t, 0.5, p.Dampening)
	for _, tc := range []struct {
		refill    time.Duration
		damp, pen float64
		msg       string
	}{
		{-time.Second, 0, 0, "refill period -1s; want a positive duration"},
		{0, 1.5, 0, "dampening 1.5; want a number in (0, 1]"},
		{0, math.NaN(), 0, "dampening NaN"},
		{0, 0, -0.5, "throttle penalty -0.5; want a finite number >= 0, or NoThrottlePenalty"},
		{0, 0, math.Inf(1), "throttle penalty +Inf"},
	} {
		c := NewPool()
		err := c.SetTuning(tc.refill, tc.damp, tc.pen)
		require.ErrorIs(t, err, errs.ErrInvalidArgument, tc.msg)
		require.ErrorContains(t, err, tc.msg)
	}
}

// TestSettersSet: what the setters keep, and what they imply.
func TestSettersSet(t *testing.T) {
	p := NewPool()
	require.Equal(t, 0.9, p.Dampening)
	require.NoError(t, p.AddPrewarm([]int{8}))
	require.NoError(t, p.AddPrewarm([]int{16, 24}))
	require.Equal(t, []int{8, 16, 24}, p.Prewarm)
	require.NoError(t, p.SetPenalty(tokenbucket.NoPenalty))
	require.Equal(t, tokenbucket.NoPenalty, p.Penalty, "NoThrottlePenalty turns it off (0 is the default, LimiterTuning's zero field)")
	require.NoError(t, p.SetPenalty(2))
	require.Equal(t, 2.0, p.Penalty)
	require.NoError(t, p.SetHostWait(SpinInDriver))
	require.True(t, p.HostWaitSet)
	require.NoError(t, p.SetHostWait(0))
	require.Equal(t, time.Duration(0), p.HostWait)
	require.True(t, p.HostWaitSet, "a spin of 0 is set, not the default")
	path := filepath.Join(t.TempDir(), "fcsp")
	require.NoError(t, p.SetRegion(path))
	require.Equal(t, path, p.Region)
	require.NoError(t, p.SetHeartbeat(time.Second, 5*time.Second))
	require.Equal(t, [2]time.Duration{time.Second, 5 * time.Second}, [2]time.Duration{p.Beat, p.ReapAfter})

	var c Tenant
	require.NoError(t, c.SetGPUShare(0.5))
	require.True(t, c.Metered, "a GPU share is measured")
	require.NoError(t, c.AddReshapeSizes([]int{16}))
	require.NoError(t, c.AddReshapeSizes([]int{32}))
	require.Equal(t, []int{16, 32}, c.Shape.Sizes)
	require.NoError(t, c.SetConcurrentDos(smpart.MaxSlots))
	require.NoError(t, c.SetPriority(LatencyCritical))
	require.Equal(t, "latency-critical", c.Prio.Prio.String())
	require.Equal(t, "normal", Normal.String())
}

// TestApply: options run in order, the first error stops them, and an
// option without a function is named by its index.
func TestApply(t *testing.T) {
	type opt struct{ f func(*Tenant) error }
	fn := func(o opt) func(*Tenant) error { return o.f }
	var ran []int
	mark := func(i int, err error) opt {
		return opt{func(*Tenant) error { ran = append(ran, i); return err }}
	}
	var c Tenant
	require.NoError(t, Apply(&c, []opt{mark(0, nil), mark(1, nil)}, fn))
	require.Equal(t, []int{0, 1}, ran)

	ran = nil
	bad := errors.New("bad")
	require.ErrorIs(t, Apply(&c, []opt{mark(0, bad), mark(1, nil)}, fn), bad)
	require.Equal(t, []int{0}, ran)

	err := Apply(&c, []opt{mark(0, nil), {}}, fn)
	require.ErrorIs(t, err, errs.ErrInvalidArgument)
	require.EqualError(t, err, "fcsp: invalid argument: option 1 is the zero value; pass the options fcsp's With functions make")
}

// TestResolve: the rules between options, and what they imply.
func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		name   string
		c      Tenant
		tenant string
		env    float64 // CUDA_DEVICE_SM_LIMIT; 0: not set
		msg    string  // the error's; "": none
		want   Tenant  // after Resolve, where no error
		logged bool    // the GPU share was bound by the environment
	}{
		{name: "no options", want: Tenant{}},
		{name: "empty name", tenant: "-", msg: "empty tenant name"},
		{name: "SMs and rest", c: Tenant{SMs: 8, Rest: true}, msg: "[WithSMs WithRestOfSMs] together; choose one"},
		{name: "share and remainder", c: Tenant{Shape: Shape{Share: 0.5, Remainder: true}}, msg: "[WithSMShare WithRemainderSMs] together"},
		{name: "reshape alone", c: Tenant{Shape: Shape{Sizes: []int{16}}}, msg: "WithReshapeSizes needs a size to start at"},
		{name: "reshape from remainder", c: Tenant{Shape: Shape{Sizes: []int{16}, Remainder: true}}, msg: "WithReshapeSizes needs a size to start at"},
		{name: "reshape from SMs", c: Tenant{SMs: 8, Shape: Shape{Sizes: []int{16}}}, want: Tenant{SMs: 8, Shape: Shape{Sizes: []int{16}}}},
		{name: "floor on latency", c: Tenant{Prio: Prio{Prio: LatencyCritical, Floor: 0.5}}, msg: "WithBandwidthFloor on a LatencyCritical tenant"},
		{name: "floor with SM limit", c: Tenant{SMLimit: 0.5, Prio: Prio{Floor: 0.5}}, msg: "WithBandwidthFloor with WithSMLimit; a floor needs a GPU-time bucket: use WithGPUShare"},
		{name: "share with SM limit", c: Tenant{SMLimit: 0.5, GPUShare: 0.5, Metered: true}, msg: "WithGPUShare and WithSMLimit together; choose one"},
		{name: "latency is metered", c: Tenant{Prio: Prio{Prio: LatencyCritical}}, want: Tenant{Metered: true, Prio: Prio{Prio: LatencyCritical}}},
		{name: "floor gets a share of 1", c: Tenant{Prio: Prio{Floor: 0.25}}, want: Tenant{GPUShare: 1, Metered: true, Prio: Prio{Floor: 0.25}}},
		{name: "floor keeps its share", c: Tenant{GPUShare: 0.5, Metered: true, Prio: Prio{Floor: 0.25}}, want: Tenant{GPUShare: 0.5, Metered: true, Prio: Prio{Floor: 0.25}}},
		{name: "env limits an unlimited tenant", env: 0.3, want: Tenant{SMLimit: 0.3}},
		{name: "env lowers an SM limit", c: Tenant{SMLimit: 0.6}, env: 0.3, want: Tenant{SMLimit: 0.3}},
		{name: "env keeps a lower SM limit", c: Tenant{SMLimit: 0.2}, env: 0.3, want: Tenant{SMLimit: 0.2}},
		{name: "env binds a GPU share", c: Tenant{GPUShare: 0.6, Metered: true}, env: 0.3, want: Tenant{GPUShare: 0.3, Metered: true}, logged: true},
		{name: "env keeps a lower GPU share", c: Tenant{GPUShare: 0.2, Metered: true}, env: 0.3, want: Tenant{GPUShare: 0.2, Metered: true}},
		{name: "env binds a floor's share", c: Tenant{Prio: Prio{Floor: 0.5}}, env: 0.3, want: Tenant{GPUShare: 0.3, Metered: true, Prio: Prio{Floor: 0.5}}, logged: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log bytes.Buffer
			name := "t"
			if tc.tenant == "-" {
				name = ""
			}
			c := tc.c
			err := c.Resolve(name, tc.env, tc.env > 0, slog.New(slog.NewTextHandler(&log, nil)))
			if tc.msg != "" {
				require.ErrorIs(t, err, errs.ErrInvalidArgument)
				require.Contains(t, err.Error(), tc.msg)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, c)
			require.Equal(t, tc.logged, strings.Contains(log.String(), "GPU share bound by CUDA_DEVICE_SM_LIMIT"), log.String())
		})
	}
}

// TestPartitioned: every way of asking for SMs partitions the tenant.
func TestPartitioned(t *testing.T) {
	require.False(t, (&Tenant{}).Partitioned())
	require.False(t, (&Tenant{Shape: Shape{Sizes: []int{8}}}).Partitioned())
	for _, c := range []Tenant{{SMs: 8}, {Rest: true}, {Shape: Shape{Share: 0.5}}, {Shape: Shape{Remainder: true}}} {
		require.True(t, c.Partitioned(), "%+v", c)
	}
}

// TestContextKept: SetContext keeps the context it is given.
func TestContextKept(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var c Tenant
	require.NoError(t, c.SetContext(ctx))
	require.Equal(t, ctx, c.Ctx)
}

// fcsp.NoStallTimeout is written as its number (go doc would show
// config.NoStall); it must stay this package's NoStall.
func TestNoStallIsMinusOne(t *testing.T) {
	if NoStall != -1 {
		t.Fatalf("NoStall is %v; fcsp.NoStallTimeout says -1", NoStall)
	}
}

// The pool samples the device's view of its memory every second on a GPU,
// on the simulator only when asked, never with WithMemorySampling(0).
func TestSamplePeriod(t *testing.T) {
	p := NewPool()
	require.Equal(t, DefaultSample, p.SamplePeriod())
	p.Simulated = true
	require.Zero(t, p.SamplePeriod())
	require.NoError(t, p.SetSample(time.Hour))
	require.Equal(t, time.Hour, p.SamplePeriod())
	require.NoError(t, p.SetSample(0))
	require.Zero(t, p.SamplePeriod())
}
