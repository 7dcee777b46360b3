package tokenbucket

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// SetSMs resizes the buckets to the new SM count: a full bucket stays full
// (of the new size), a half-spent one half-spent, and the refill follows the
// new size at the same limit; one tier (share 1, leased) and two tiers alike.
func TestSetSMsResizesAndKeepsFill(t *testing.T) {
	for _, share := range []float64{1, 0.5} {
		// SMs 1 x 1000 threads: 1000 tokens, at limit 0.5 refilling 500 a ms.
		l, clk := newSmall(t, 0.5)
		s := newStream(t, l, share)
		if err := l.SetSMs(2); err != nil {
			t.Fatal(err)
		}
		if got := l.Capacity(); got != 2000 {
			t.Fatalf("share %v: capacity %v after SetSMs(2), want 2000", share, got)
		}
		if got, want := count(s, 10), int(200*share); got != want {
			t.Fatalf("share %v: a full bucket resized to 2 SMs admitted %d x 10 tokens, want %d", share, got, want)
		}
		clk.Advance(time.Millisecond) // refills 1000 x 0.5 of the device, share of it for the stream
		if got, want := count(s, 10), int(100*share); got != want {
			t.Fatalf("share %v: refill in 1 ms at 2 SMs admitted %d x 10, want %d", share, got, want)
		}

		// Half spent, then shrunk back to 1 SM: half of the smaller bucket.
		clk.Advance(10 * time.Millisecond) // full again
		if got, want := count(s, 1000*share), 2; got != want {
			t.Fatalf("share %v: %d halves of the bucket, want %d", share, got, want)
		}
		clk.Advance(10 * time.Millisecond)
		if !s.TryAcquire(1000 * share) { // half of 2000*share
			t.Fatalf("share %v: half the bucket refused", share)
		}
		if err := l.SetSMs(1); err != nil {
			t.Fatal(err)
		}
		if got, want := count(s, 10), int(50*share); got != want {
			t.Fatalf("share %v: a half-spent bucket shrunk to 1 SM admitted %d x 10, want %d (half of it)", share, got, want)
		}
	}
}

// Bad input is refused with a typed error and changes nothing.
func TestSetSMsBadInput(t *testing.T) {
	l, _ := newSmall(t, 1)
	for _, n := range []int{0, -3} {
		err := l.SetSMs(n)
		if !errors.Is(err, ErrInvalidConfig) || !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("SetSMs(%d): %v, want ErrInvalidConfig", n, err)
		}
	}
	if got := l.Capacity(); got != 1000 {
		t.Fatalf("capacity %v after refused resizes, want 1000", got)
	}
}

// SetSMs races admissions, waits, new streams and Close: no data race, no
// lost wake-up (every Wait returns), and the buckets end at one of the sizes.
func TestSetSMsRacesAdmissionAndClose(t *testing.T) {
	for range 20 {
		l, err := New(Config{SMs: 4, ThreadsPerSM: 1000, SMLimit: 0.5, RefillPeriod: 50 * time.Microsecond})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var wg sync.WaitGroup
		for g := range 4 {
			s, err := l.NewStream([]float64{1, 0.5}[g%2])
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 200 {
					if i%3 == 0 {
						s.TryAcquire(500)
						continue
					}
					if err := s.Wait(ctx, 500); err != nil && !errors.Is(err, ErrClosed) {
						t.Errorf("Wait: %v", err)
						return
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				if err := l.SetSMs(1 + i%8); err != nil {
					t.Errorf("SetSMs: %v", err)
				}
			}
		}()
		wg.Wait()
		cancel()
		if c := l.Capacity(); c < 1000 || c > 8000 {
			t.Fatalf("capacity %v, want one of the sizes set", c)
		}
		_ = l.Close()
	}
}
