package tokenbucket

import (
	"context"
	"errors"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fcsp-go/fcsp-go/stream"
)

func validConfig() Config {
	return Config{SMs: 132, ThreadsPerSM: 2048, SMLimit: 1}
}

func TestConfigValidation(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Config)
		want   []string // substrings, one per expected problem
	}{
		{"zero SMs", func(c *Config) { c.SMs = 0 }, []string{"SMs = 0, want > 0"}},
		{"negative SMs", func(c *Config) { c.SMs = -4 }, []string{"SMs = -4"}},
		{"zero threads", func(c *Config) { c.ThreadsPerSM = 0 }, []string{"ThreadsPerSM = 0, want > 0"}},
		{"negative token factor", func(c *Config) { c.TokenFactor = -1 }, []string{"TokenFactor = -1, want finite and > 0"}},
		{"NaN token factor", func(c *Config) { c.TokenFactor = math.NaN() }, []string{"TokenFactor = NaN"}},
		{"infinite token factor", func(c *Config) { c.TokenFactor = math.Inf(1) }, []string{"TokenFactor = +Inf"}},
		{"zero SM limit", func(c *Config) { c.SMLimit = 0 }, []string{"SMLimit = 0, want a fraction in (0, 1]"}},
		{"SM limit above 1", func(c *Config) { c.SMLimit = 1.5 }, []string{"SMLimit = 1.5"}},
		{"NaN SM limit", func(c *Config) { c.SMLimit = math.NaN() }, []string{"SMLimit = NaN"}},
		{"negative refill period", func(c *Config) { c.RefillPeriod = -time.Millisecond }, []string{"RefillPeriod = -1ms, want > 0"}},
		{"negative dampening", func(c *Config) { c.Dampening = -0.5 }, []string{"Dampening = -0.5, want in (0, 1]"}},
		{"dampening above 1", func(c *Config) { c.Dampening = 1.1 }, []string{"Dampening = 1.1"}},
		{"NaN dampening", func(c *Config) { c.Dampening = math.NaN() }, []string{"Dampening = NaN"}},
		{"infinite dampening", func(c *Config) { c.Dampening = math.Inf(1) }, []string{"Dampening = +Inf"}},
		{"negative penalty", func(c *Config) { c.Penalty = -0.5 }, []string{"Penalty = -0.5, want finite and >= 0"}},
		{"infinite penalty", func(c *Config) { c.Penalty = math.Inf(1) }, []string{"Penalty = +Inf"}},
		{"capacity overflows", func(c *Config) { c.TokenFactor = math.MaxFloat64 }, []string{"SMs*ThreadsPerSM*TokenFactor = +Inf"}},
		{"several at once", func(c *Config) { c.SMs, c.SMLimit = 0, 2 }, []string{"SMs = 0", "SMLimit = 2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := validConfig()
			tt.modify(&cfg)
			l, err := New(cfg)
			if err == nil {
				t.Fatalf("New(%+v) = %v, want error", cfg, l)
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("error %q does not match ErrInvalidConfig", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	l, err := New(Config{SMs: 132, ThreadsPerSM: 2048, SMLimit: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := l.Capacity(), 132.0*2048; got != want {
		t.Errorf("Capacity = %v, want %v (TokenFactor 1)", got, want)
	}
	// Half the capacity per default 1 ms refill period.
	if got, want := l.Rate(), 132.0*2048*0.5*1000; math.Abs(got-want) > 1e-6*want {
		t.Errorf("Rate = %v, want %v", got, want)
	}
	// Dampening 0.9, penalty weight 1: 0.9 * (1 + 0.5).
	if got, want := l.Cost([3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, stream.Default), 0.9*1.5; math.Abs(got-want) > 1e-12 {
		t.Errorf("Cost of one thread = %v, want %v", got, want)
	}
	if l.SMLimit() != 0.5 {
		t.Errorf("SMLimit = %v", l.SMLimit())
	}
}

func TestCost(t *testing.T) {
	g := func(x, y, z uint32) [3]uint32 { return [3]uint32{x, y, z} }
	tests := []struct {
		name        string
		cfg         Config
		grid, block [3]uint32
		class       stream.Class
		want        float64
	}{
		{"full device, no penalty", Config{SMLimit: 1}, g(64, 1, 1), g(256, 1, 1), stream.Default, 64 * 256 * 0.9},
		{"3-D dims multiply", Config{SMLimit: 1}, g(4, 2, 3), g(8, 4, 2), stream.Default, 24 * 64 * 0.9},
		{"half device, default penalty", Config{SMLimit: 0.5}, g(64, 1, 1), g(256, 1, 1), stream.Default, 64 * 256 * 0.9 * 1.5},
		{"penalty weight 2", Config{SMLimit: 0.75, Penalty: 2}, g(10, 1, 1), g(100, 1, 1), stream.Default, 1000 * 0.9 * 1.5},
		{"no penalty", Config{SMLimit: 0.25, Penalty: NoPenalty}, g(10, 1, 1), g(100, 1, 1), stream.Default, 1000 * 0.9},
		{"dampening 1", Config{SMLimit: 1, Dampening: 1}, g(10, 1, 1), g(100, 1, 1), stream.Default, 1000},
		{"attention 0.8", Config{SMLimit: 0.5}, g(10, 1, 1), g(100, 1, 1), stream.Attention, 1000 * 0.9 * 1.5 * 0.8},
		{"memcpy 0.5", Config{SMLimit: 0.5}, g(10, 1, 1), g(100, 1, 1), stream.Memcpy, 1000 * 0.9 * 1.5 * 0.5},
		{"nccl bypasses", Config{SMLimit: 0.5}, g(10, 1, 1), g(100, 1, 1), stream.NCCL, 0},
		{"unknown class pays in full", Config{SMLimit: 1}, g(10, 1, 1), g(100, 1, 1), stream.Class(200), 1000 * 0.9},
		{"zero dimension", Config{SMLimit: 1}, g(10, 0, 1), g(100, 1, 1), stream.Default, 0},
		{"huge dims do not overflow", Config{SMLimit: 1, Dampening: 1}, g(math.MaxUint32, 1, 1), g(math.MaxUint32, 1, 1), stream.Default, float64(math.MaxUint32) * math.MaxUint32},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.SMs, tt.cfg.ThreadsPerSM = 132, 2048
			l, err := New(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			got := l.Cost(tt.grid, tt.block, tt.class)
			if math.Abs(got-tt.want) > 1e-9*math.Max(1, tt.want) {
				t.Errorf("Cost = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCostFollowsSMLimit(t *testing.T) {
	l, _ := New(Config{SMs: 1, ThreadsPerSM: 1000, SMLimit: 1})
	one := [3]uint32{1, 1, 1}
	block := [3]uint32{100, 1, 1}
	if got := l.Cost(one, block, stream.Default); math.Abs(got-90) > 1e-9 {
		t.Errorf("Cost at SMLimit 1 = %v, want 90", got)
	}
	if err := l.SetSMLimit(0.2); err != nil {
		t.Fatal(err)
	}
	if got := l.Cost(one, block, stream.Default); math.Abs(got-90*1.8) > 1e-9 {
		t.Errorf("Cost at SMLimit 0.2 = %v, want %v", got, 90*1.8)
	}
}

// newSmall returns a limiter of 1000 tokens refilled at 1000 tokens/ms (at
// SMLimit 1) on a fake clock.
func newSmall(t *testing.T, smLimit float64) (*Limiter, *fakeClock) {
	t.Helper()
	clk := new(fakeClock)
	l, err := New(Config{SMs: 1, ThreadsPerSM: 1000, SMLimit: smLimit, Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return l, clk
}

func newStream(t *testing.T, l *Limiter, share float64) *Stream {
	t.Helper()
	s, err := l.NewStream(share)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewStreamValidation(t *testing.T) {
	l, _ := newSmall(t, 1)
	for _, share := range []float64{0, -0.1, 1.5, math.NaN(), math.Inf(1)} {
		_, err := l.NewStream(share)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "share = ") ||
			!strings.Contains(err.Error(), "want a fraction of the device in (0, 1]") {
			t.Errorf("NewStream(%v) = %v, want an ErrInvalidConfig naming share", share, err)
		}
	}
	for _, f := range []float64{0, -1, 1.01, math.NaN()} {
		if err := l.SetSMLimit(f); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "SMLimit = ") {
			t.Errorf("SetSMLimit(%v) = %v, want an ErrInvalidConfig naming SMLimit", f, err)
		}
	}
}

func TestStreamShareRespected(t *testing.T) {
	l, clk := newSmall(t, 1)
	s := newStream(t, l, 0.25) // 250 tokens, 250 tokens/ms
	n := count(s, 1)
	if n != 250 {
		t.Errorf("a full 0.25 stream admitted %d tokens, want its 250", n)
	}
	got := 0
	for range 10_000 { // 10 ms in 1 µs steps
		clk.Advance(time.Microsecond)
		for s.TryAcquire(1) {
			got++
		}
	}
	if want := 2500; math.Abs(float64(got-want)) > 0.02*float64(want) {
		t.Errorf("0.25 stream admitted %d in 10 ms, want %d ±2%%", got, want)
	}
}

func TestDeviceSharedAndRefund(t *testing.T) {
	l, _ := newSmall(t, 1)
	a, b := newStream(t, l, 1), newStream(t, l, 1)
	if !a.TryAcquire(700) {
		t.Fatal("stream a refused 700 of 1000")
	}
	if b.TryAcquire(400) {
		t.Fatal("device admitted 400 with 300 left")
	}
	// b's own bucket must have been refunded: it is still full.
	if !b.bucket.TryAcquire(1000) {
		t.Error("stream bucket not refunded after the device refused")
	}
	b.bucket.Refund(1000)
	if !b.TryAcquire(300) {
		t.Error("device refused the 300 it has left")
	}
	if st := b.Stats(); st.Admitted != 1 || st.Rejected != 1 {
		t.Errorf("b stats = %+v, want 1 admitted, 1 rejected", st)
	}
}

// TestDeviceBoundsAllStreams: streams whose shares sum past 1 still cannot
// exceed the device bucket together, even under concurrency.
func TestDeviceBoundsAllStreams(t *testing.T) {
	l, clk := newSmall(t, 0.5) // 1000 tokens, 500 tokens/ms
	var streams []*Stream
	for range 4 {
		streams = append(streams, newStream(t, l, 0.6))
	}
	var total atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i, s := range streams {
		for range 4 {
			wg.Go(func() {
				for !stop.Load() {
					if s.TryAcquire(float64(1 + i)) {
						total.Add(int64(1 + i))
					}
					runtime.Gosched() // let the clock move (see TestConcurrentSetRate)
				}
			})
		}
	}
	const steps, step = 2000, time.Microsecond
	for range steps {
		clk.Advance(step)
		runtime.Gosched()
	}
	stop.Store(true)
	wg.Wait()
	limit := l.Capacity() + l.Rate()*(steps*step).Seconds()
	if got := float64(total.Load()); got > limit {
		t.Fatalf("streams admitted %v tokens together, device limit %v", got, limit)
	}
	for i, s := range streams {
		st := s.Stats()
		if slimit := 0.6 * limit; float64(st.Admitted*uint64(1+i)) > slimit {
			t.Errorf("stream %d admitted %d tokens, its limit is %v", i, st.Admitted*uint64(1+i), slimit)
		}
	}
}

func TestSetSMLimitUpdatesStreams(t *testing.T) {
	l, _ := newSmall(t, 1)
	s, closed := newStream(t, l, 0.5), newStream(t, l, 0.5)
	closed.Close()
	if err := l.SetSMLimit(0.25); err != nil {
		t.Fatal(err)
	}
	if got, want := l.Rate(), 250_000.0; math.Abs(got-want) > 1e-9*want {
		t.Errorf("device rate = %v, want %v", got, want)
	}
	if got, want := s.bucket.Rate(), 125_000.0; math.Abs(got-want) > 1e-9*want {
		t.Errorf("stream rate = %v, want %v", got, want)
	}
	if got, want := closed.bucket.Rate(), 500_000.0; got != want {
		t.Errorf("closed stream rate = %v, want it left at %v", got, want)
	}
	if l.SMLimit() != 0.25 {
		t.Errorf("SMLimit = %v", l.SMLimit())
	}
	// A stream created after the change starts at the new rate.
	if got, want := newStream(t, l, 1).bucket.Rate(), 250_000.0; math.Abs(got-want) > 1e-9*want {
		t.Errorf("new stream rate = %v, want %v", got, want)
	}
}

func TestStreamClose(t *testing.T) {
	l, _ := newSmall(t, 1)
	s := newStream(t, l, 1)
	for range 3 {
		if err := s.Close(); err != nil {
			t.Fatalf("Close = %v", err)
		}
	}
	if s.TryAcquire(1) {
		t.Error("closed stream admitted a launch")
	}
	if err := s.Wait(context.Background(), 1); !errors.Is(err, ErrClosed) {
		t.Errorf("Wait on closed stream = %v, want ErrClosed", err)
	}
	if len(l.streams) != 0 {
		t.Errorf("limiter still tracks %d streams", len(l.streams))
	}
}

func TestNCCLBypasses(t *testing.T) {
	l, _ := newSmall(t, 0.1)
	s := newStream(t, l, 0.1)
	cost := l.Cost([3]uint32{1000, 1, 1}, [3]uint32{1024, 1, 1}, stream.NCCL)
	for range 1000 {
		if !s.TryAcquire(cost) {
			t.Fatal("NCCL launch throttled")
		}
	}
	if err := s.Wait(context.Background(), cost); err != nil {
		t.Fatal(err)
	}
	if !l.device.TryAcquire(1000) {
		t.Error("NCCL launches drew on the device bucket")
	}
}

func TestStreamWaitCancelRefundsBoth(t *testing.T) {
	l, _ := newSmall(t, 1) // clock frozen
	hog, s := newStream(t, l, 1), newStream(t, l, 0.5)
	if !hog.TryAcquire(1000) {
		t.Fatal("hog refused")
	}
	before := l.device.state.Load()
	ctx, cancel := context.WithCancel(context.Background())
	done := waitResult(func() error { return s.Wait(ctx, 100) })
	untilReserved(t, l.device, before)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait = %v, want context.Canceled", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("Wait did not return after cancel")
	}
	if l.device.state.Load() != before {
		t.Error("device reservation not refunded")
	}
	if !s.bucket.TryAcquire(500) {
		t.Error("stream reservation not refunded")
	}
	if st := s.Stats(); st.Admitted != 0 || st.Throttled != 0 {
		t.Errorf("stats after a cancelled wait = %+v", st)
	}
}

func TestStreamWaitStatsAndOversize(t *testing.T) {
	l, clk := newSmall(t, 1)
	s := newStream(t, l, 0.1)                                 // 100 tokens, 100 tokens/ms
	if err := s.Wait(context.Background(), 250); err != nil { // oversized, full bucket: no wait
		t.Fatal(err)
	}
	before := s.bucket.state.Load()
	done := waitResult(func() error { return s.Wait(context.Background(), 250) })
	untilReserved(t, s.bucket, before)
	// An oversized request is due when the bucket is full again: the 150
	// owed tokens plus the 100 of the burst take 2.5 ms.
	clk.Advance(2500 * time.Microsecond)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(hangGuard):
		t.Fatal("oversized Wait deadlocked")
	}
	st := s.Stats()
	if st.Admitted != 2 || st.Throttled != 1 || st.WaitNanos != int64(2500*time.Microsecond) {
		t.Errorf("stats = %+v, want 2 admitted, 1 throttled, 2.5ms waited", st)
	}
}
