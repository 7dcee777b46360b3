package tokenbucket

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

func TestNewBucketValidation(t *testing.T) {
	tests := []struct {
		name        string
		rate, burst float64
		want        string // substring of the error
	}{
		{"zero rate", 0, 1, "rate = 0, want a finite number of tokens per second > 0"},
		{"negative rate", -5, 1, "rate = -5, want"},
		{"NaN rate", math.NaN(), 1, "rate = NaN"},
		{"infinite rate", math.Inf(1), 1, "rate = +Inf"},
		{"zero burst", 1, 0, "burst = 0, want a finite number of tokens > 0"},
		{"negative burst", 1, -1, "burst = -1"},
		{"NaN burst", 1, math.NaN(), "burst = NaN"},
		{"infinite burst", 1, math.Inf(1), "burst = +Inf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := NewBucket(tt.rate, tt.burst)
			if err == nil {
				t.Fatalf("NewBucket(%v, %v) = %v, want error", tt.rate, tt.burst, b)
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("error %q does not match ErrInvalidConfig", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestBucketStartsFull(t *testing.T) {
	var clk fakeClock
	b, err := NewBucket(1000, 10, WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	if b.Rate() != 1000 || b.Burst() != 10 {
		t.Errorf("Rate, Burst = %v, %v; want 1000, 10", b.Rate(), b.Burst())
	}
	for i := range 10 {
		if !b.TryAcquire(1) {
			t.Fatalf("acquire %d of a full burst-10 bucket refused", i)
		}
	}
	if b.TryAcquire(1) {
		t.Fatal("11th acquire admitted without time passing")
	}
	clk.Advance(time.Millisecond - 1)
	if b.TryAcquire(1) {
		t.Fatal("token admitted before its interval elapsed")
	}
	clk.Advance(1)
	if !b.TryAcquire(1) {
		t.Fatal("token refused after its interval elapsed")
	}
}

// TestBucketAccuracy checks that a drained bucket admits rate*window within
// 2%, over a long and a short window, for rates whose token interval is and
// is not a whole number of nanoseconds.
func TestBucketAccuracy(t *testing.T) {
	tests := []struct {
		rate, n      float64
		window, step time.Duration
	}{
		{1000, 1, time.Second, 100 * time.Microsecond},
		{1000, 1, 10 * time.Millisecond, time.Microsecond},
		{100_000, 1, time.Second, time.Microsecond},
		{100_000, 1, 10 * time.Millisecond, time.Microsecond},
		{333_333, 1, time.Second, time.Microsecond},
		{333_333, 1, 10 * time.Millisecond, 100 * time.Nanosecond},
		{270_336_000, 14_745.6, 10 * time.Millisecond, time.Microsecond}, // H200 device bucket, a 64×256 launch
		{1e6, 2.5, time.Second, 7 * time.Microsecond},
	}
	for _, tt := range tests {
		name := fmt.Sprintf("rate=%g,n=%g,window=%v", tt.rate, tt.n, tt.window)
		t.Run(name, func(t *testing.T) {
			var clk fakeClock
			// The burst must hold what accrues in one step of the fake
			// clock, or the cap (not the rate) would limit admissions.
			burst := tt.n + tt.rate*tt.step.Seconds()
			b, err := NewBucket(tt.rate, burst, WithClock(clk.Now))
			if err != nil {
				t.Fatal(err)
			}
			drain(b)
			got := float64(countWindow(b, &clk, tt.n, tt.window, tt.step)) * tt.n
			want := tt.rate * tt.window.Seconds()
			if ratio := got / want; math.Abs(ratio-1) > 0.02 {
				t.Errorf("admitted %v tokens in %v, want %v ±2%% (ratio %.4f)", got, tt.window, want, ratio)
			}
		})
	}
}

func TestSetRateWithinOneInterval(t *testing.T) {
	tests := []struct {
		name     string
		from, to float64
	}{
		{"decrease", 10_000, 1_000},
		{"increase", 1_000, 100_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var clk fakeClock
			b, err := NewBucket(tt.from, 1, WithClock(clk.Now))
			if err != nil {
				t.Fatal(err)
			}
			drain(b)
			// Leave the bucket 30% of the way to its next token, so the
			// carried-over fraction is visible.
			clk.Advance(time.Duration(0.3 * 1e9 / tt.from))
			if err := b.SetRate(tt.to); err != nil {
				t.Fatal(err)
			}
			if b.Rate() != tt.to {
				t.Errorf("Rate() = %v after SetRate(%v)", b.Rate(), tt.to)
			}
			interval := time.Duration(1e9 / tt.to)
			step := interval / 1000
			var first time.Duration
			for first = 0; !b.TryAcquire(1); first += step {
				if first > 2*interval {
					t.Fatalf("no token within %v of SetRate; new interval is %v", first, interval)
				}
				clk.Advance(step)
			}
			if first > interval {
				t.Errorf("first token %v after SetRate, want within one new interval %v", first, interval)
			}
			// 70% of a token was still owed; converted, it is due at 0.7
			// new intervals.
			if want := 7 * interval / 10; first < want-2*step || first > want+2*step {
				t.Errorf("first token %v after SetRate, want ≈%v (tokens carried over)", first, want)
			}
			window := 100 * interval
			got := countWindow(b, &clk, 1, window, step)
			if got < 98 || got > 102 {
				t.Errorf("admitted %d in %v at the new rate, want 100 ±2%%", got, window)
			}
		})
	}
	var clk fakeClock
	b, _ := NewBucket(1, 1, WithClock(clk.Now))
	for _, bad := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if err := b.SetRate(bad); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("SetRate(%v) = %v, want ErrInvalidConfig", bad, err)
		}
	}
	if b.Rate() != 1 {
		t.Errorf("rate changed by rejected SetRate: %v", b.Rate())
	}
}

// Many SetRate calls in a row wrap the generation counter; the bucket must
// keep its accounting through the wrap.
func TestSetRateGenerationWrap(t *testing.T) {
	var clk fakeClock
	b, _ := NewBucket(1000, 10, WithClock(clk.Now))
	if !b.TryAcquire(4) {
		t.Fatal("full bucket refused 4")
	}
	for i := range 3 * (genMask + 1) {
		if err := b.SetRate(float64(1000 + i%2*1000)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.SetRate(1000); err != nil {
		t.Fatal(err)
	}
	if !b.TryAcquire(6) {
		t.Error("6 tokens left after wraps, refused")
	}
	if b.TryAcquire(0.01) {
		t.Error("bucket should be empty")
	}
}

func TestReserveGoesIntoDebt(t *testing.T) {
	var clk fakeClock
	b, _ := NewBucket(1000, 1, WithClock(clk.Now))
	for i, want := range []time.Duration{0, time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond} {
		if got := b.Reserve(1); got != want {
			t.Errorf("Reserve #%d = %v, want %v", i, got, want)
		}
	}
	clk.Advance(3*time.Millisecond + time.Millisecond - 1)
	if b.TryAcquire(1) {
		t.Error("admitted while still in debt")
	}
	clk.Advance(1)
	if !b.TryAcquire(1) {
		t.Error("refused once the debt was repaid")
	}
	if got := b.Reserve(0); got != 0 {
		t.Errorf("Reserve(0) = %v, want 0", got)
	}
}

// A request larger than the burst is admitted when the bucket is full and
// then repaid as debt: it neither deadlocks nor escapes the rate.
func TestOversizedRequest(t *testing.T) {
	var clk fakeClock
	// 1 token per ms; a debt bound that fits 25 tokens keeps plain GCRA
	// (TestBoundedDebt covers the bound).
	b, _ := NewBucket(1000, 10, WithClock(clk.Now), WithMaxDebt(15*time.Millisecond))
	if !b.TryAcquire(25) {
		t.Fatal("oversized request refused by a full bucket")
	}
	// 25 tokens taken from 10: 15 owed, plus 1 for the next request.
	clk.Advance(16*time.Millisecond - 1)
	if b.TryAcquire(1) {
		t.Fatal("admitted before the oversized request was repaid")
	}
	clk.Advance(1)
	if !b.TryAcquire(1) {
		t.Fatal("refused after the oversized request was repaid")
	}
	if b.TryAcquire(25) {
		t.Fatal("oversized request admitted by a bucket that is not full")
	}
	// Reserve tells how long until the bucket is full again.
	if got, want := b.Reserve(25), 10*time.Millisecond; got != want {
		t.Errorf("Reserve(25) = %v, want %v (time to fill)", got, want)
	}
	if got, want := b.Reserve(25), 35*time.Millisecond; got != want {
		t.Errorf("second Reserve(25) = %v, want %v", got, want)
	}
}

func TestRefund(t *testing.T) {
	var clk fakeClock
	b, _ := NewBucket(1000, 10, WithClock(clk.Now))
	if !b.TryAcquire(10) {
		t.Fatal("full bucket refused its burst")
	}
	b.Refund(4)
	if !b.TryAcquire(4) {
		t.Error("refunded tokens not available")
	}
	if b.TryAcquire(0.01) {
		t.Error("more available than was refunded")
	}

	full, _ := NewBucket(1000, 10, WithClock(clk.Now))
	full.Refund(5)
	if full.TryAcquire(10.01) && full.TryAcquire(0.01) {
		t.Error("refund raised the bucket above its burst")
	}
}

func TestInvalidAmounts(t *testing.T) {
	var clk fakeClock
	b, _ := NewBucket(1000, 1, WithClock(clk.Now))
	for _, n := range []float64{math.NaN(), math.Inf(1)} {
		if b.TryAcquire(n) {
			t.Errorf("TryAcquire(%v) = true", n)
		}
		if got := b.Reserve(n); got != math.MaxInt64 {
			t.Errorf("Reserve(%v) = %v, want never", n, got)
		}
		b.Refund(n)
	}
	for _, n := range []float64{0, -1, math.Inf(-1)} {
		if !b.TryAcquire(n) {
			t.Errorf("TryAcquire(%v) = false, want a successful no-op", n)
		}
	}
	if !b.TryAcquire(1) {
		t.Error("invalid amounts changed the bucket")
	}
}
