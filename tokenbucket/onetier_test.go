package tokenbucket

import (
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A share-1 stream is charged on the device bucket alone (issue 19): its
// own bucket stays untouched by admissions, adjustments and reservations.
// Before, every admission also CASed it.
func TestShareOneChargesTheDeviceWordOnly(t *testing.T) {
	l, clk := newSmall(t, 1)
	s := newStream(t, l, 1)
	own := s.bucket.state.Load()
	dev := l.device.state.Load()
	if !s.TryAcquire(100) {
		t.Fatal("refused with a full bucket")
	}
	s.Adjust(50)
	r := s.Reserve(10)
	r.Cancel()
	clk.Advance(time.Microsecond)
	if s.bucket.state.Load() != own || s.bucket.owed.Load() != 0 {
		t.Error("a share-1 stream's own bucket was charged")
	}
	if l.device.state.Load() == dev {
		t.Error("the device bucket was not charged")
	}
	// A stream of a smaller share keeps its own tier.
	h := newStream(t, l, 0.5)
	before := h.bucket.state.Load()
	if !h.TryAcquire(10) || h.bucket.state.Load() == before {
		t.Error("a share-0.5 stream's own bucket was not charged")
	}
}

// Skipping the stream tier at share 1 admits exactly what the two tiers
// admitted: the same random operations (admissions, oversized ones among
// them, adjustments, reservations and cancels, rate changes, time) on two
// limiters, one with the own tier forced on, give the same answers and
// leave the device buckets equal. With one stream the stream's bucket sees
// exactly the device's charges and refunds.
func TestShareOneMatchesTwoTiers(t *testing.T) {
	for seed := range uint64(20) {
		diffTiers(t, seed, 1, func(step int, one, two bool) bool {
			t.Fatalf("seed %d step %d: TryAcquire = %v on one tier, %v on two", seed, step, one, two)
			return false
		})
	}
}

// With sibling streams the two tiers refused what the tenant held: a
// refund through one stream (Adjust, a cancelled reservation) lowers the
// device's backlog, which no stream owns, but not the other streams' own,
// and a share-1 stream then found its own bucket emptier than the tenant's.
// The one tier admits whenever the two did; where they part, it is the two
// tiers that refused (a false refusal, gone with the stream tier).
func TestShareOneNeverRefusesWhatTwoTiersAdmit(t *testing.T) {
	// Since give-backs across a change of limit are carried across it
	// (issue 28 #8) the paths part less often: a few seeds in a hundred.
	parted := 0
	for seed := uint64(0); seed < 300 && parted < 3; seed++ {
		diffTiers(t, seed, 3, func(step int, one, two bool) bool {
			if !one {
				t.Fatalf("seed %d step %d: one tier refused what two tiers admitted", seed, step)
			}
			parted++
			return false // the buckets differ from here on: next seed
		})
	}
	if parted == 0 {
		t.Error("the two paths never parted: the refund case is not exercised")
	}
}

// diffTiers runs random operations on two limiters of n share-1 streams,
// the second with the streams' own tier forced on, and calls differ when a
// TryAcquire's answers differ; it stops when differ returns false. While
// the answers agree, the device buckets must too once the first's lease
// (if any) is returned, checked every 17 steps.
func diffTiers(t *testing.T, seed uint64, n int, differ func(step int, one, two bool) bool) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	var clk fakeClock
	mk := func() (*Limiter, []*Stream) {
		l, err := New(Config{SMs: 1, ThreadsPerSM: 1000, SMLimit: 0.5, Clock: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		var ss []*Stream
		for range n {
			ss = append(ss, newStream(t, l, 1))
		}
		return l, ss
	}
	one, a := mk()
	two, b := mk()
	for _, s := range b {
		s.own = true // the two-tier path, as before issue 19
	}
	var open, openB []*Reservation
	changes := 0
	for step := range 3000 {
		i := rng.IntN(len(a))
		switch op := rng.IntN(10); {
		case op < 5:
			cost := rng.Float64() * 300
			if rng.IntN(50) == 0 {
				cost = 1000 + rng.Float64()*2000 // oversized: charged over time
			}
			if x, y := a[i].TryAcquire(cost), b[i].TryAcquire(cost); x != y && !differ(step, x, y) {
				return
			}
		case op < 6:
			d := (rng.Float64() - 0.5) * 200
			a[i].Adjust(d)
			b[i].Adjust(d)
		case op < 7:
			cost := rng.Float64() * 200
			open = append(open, a[i].Reserve(cost))
			openB = append(openB, b[i].Reserve(cost))
		case op < 8 && len(open) > 0:
			k := rng.IntN(len(open))
			open[k].Cancel()
			openB[k].Cancel()
		case op < 9:
			f := []float64{0.25, 0.5, 1}[rng.IntN(3)]
			if err := one.SetSMLimit(f); err != nil {
				t.Fatal(err)
			}
			if err := two.SetSMLimit(f); err != nil {
				t.Fatal(err)
			}
			changes++
		default:
			clk.Advance(time.Duration(rng.IntN(400)) * time.Microsecond)
		}
		if step%17 != 0 {
			continue
		}
		one.returnLease() // the lease's unused tokens back in the device bucket
		// A lease revoked after a rate change gives back its unused
		// tokens rounded down: the one tier may stand a nanosecond or two
		// behind per change (stricter), never ahead.
		// TATs at or below now all mean full.
		x, y := one.device.state.Load(), two.device.state.Load()
		now := clk.Now() - one.device.start
		if dx, dy := max(x>>genBits, now), max(y>>genBits, now); x&genMask != y&genMask || dx < dy || dx-dy > 2*int64(changes) {
			t.Fatalf("seed %d step %d: device TAT %d on one tier, %d on two (now %d)", seed, step, x>>genBits, y>>genBits, now)
		}
		if x, y := one.device.owed.Load(), two.device.owed.Load(); x != y {
			t.Fatalf("seed %d step %d: device owed %d on one tier, %d on two", seed, step, x, y)
		}
	}
}

// Many goroutines on several share-1 streams of one limiter, while the test
// moves a fake clock one token interval at a time: the tenant admits
// exactly burst + steps tokens, never more (its rate) and, once the
// goroutines catch up, never less (no token lost, no false refusal).
// Run with -race.
func TestShareOneStormIsExact(t *testing.T) {
	const (
		streams = 4
		workers = 8 // per stream
		burst   = 50
		steps   = 1000
	)
	l, clk := newMicroLimiter(t, burst)
	cost := l.Cost([3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0)
	if cost != 1 {
		t.Fatalf("cost of one thread = %v; want 1", cost)
	}
	var admitted atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range streams {
		s := newStream(t, l, 1)
		for range workers {
			wg.Go(func() {
				for !stop.Load() {
					if s.TryAcquire(cost) {
						admitted.Add(1)
					} else {
						runtime.Gosched()
					}
				}
			})
		}
	}
	stepExactly(t, clk, &admitted, &stop, &wg, burst, steps)
}

// charge is clampSpan(math.Ceil(n*nsPerToken)) without math.Ceil.
func TestChargeRoundsUp(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, ns := range []float64{1e-6, 0.3, 1, 1000.0 / 3, 1e6, 1e15} {
		p := &params{nsPerToken: ns}
		for range 10000 {
			n := math.Exp(rng.Float64()*80 - 40)
			if got, want := p.charge(n), clampSpan(math.Ceil(n*ns)); got != want {
				t.Fatalf("charge(%g) at %g ns/token = %d; want %d", n, ns, got, want)
			}
		}
		for _, n := range []float64{1, 2, 0.5, 1e-300, 1e300, math.MaxFloat64} {
			if got, want := p.charge(n), clampSpan(math.Ceil(n*ns)); got != want {
				t.Fatalf("charge(%g) at %g ns/token = %d; want %d", n, ns, got, want)
			}
		}
	}
}
