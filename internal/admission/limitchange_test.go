package admission

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/fcsp-go/fcsp-go/stream"
)

// A change of share that lands between a launch's price and its charge
// (issue 56): the charge was taken under the new share, so what it gives
// back is what it took, not carried across a change it came after. The
// change is made by the limiter's clock, read by the charge just after
// the price, so it lands there every time. Carried from a mark taken
// with the price, a raise 0.25 -> 0.75 gave back 0.6 of a bucket for the
// 0.2 the launch took (minted), a fall 0.75 -> 0.25 gave back none of its
// 0.3 (lost).
func TestChangeBetweenPriceAndChargeGivesBackWhatItTook(t *testing.T) {
	for _, tc := range []struct {
		name             string
		from, to         float64
		before, took     float64 // of a bucket: taken before the change, then by the launch it lands in
		fits, doesNotFit float64 // after the launch's give-back
	}{
		// 0.1 in hand at 0.25 is 0.3 at 0.75; the launch takes 0.2 and
		// gives it back: 0.3.
		{"raise", 0.25, 0.75, 0.9, 0.2, 0.29, 0.31},
		// Full at 0.75 is a third at 0.25; the launch takes 0.3 and gives
		// it back: a third.
		{"fall", 0.75, 0.25, 0, 0.3, 0.32, 0.34},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tn *Tenant
			var change atomic.Bool
			clock := func() int64 {
				if change.CompareAndSwap(true, false) {
					if err := tn.SetSMLimit(tc.to); err != nil {
						t.Error(err)
					}
				}
				return 1 // frozen: nothing refills
			}
			var err error
			tn, err = NewTenant(new(Pool), Config{GPUShare: tc.from, Refill: time.Millisecond, Events: new(events), Host: new(host), Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			var g Gate
			var hv atomic.Uintptr
			var sclosed atomic.Bool
			if err := tn.Init(&g, stream.Default, &hv, &sclosed); err != nil {
				t.Fatal(err)
			}
			bucket := tn.Capacity()
			if tc.before > 0 {
				if _, err := admitEstimated(&g, tc.before*bucket); err != nil {
					t.Fatal(err)
				}
			}
			change.Store(true)
			tk, err := admitEstimated(&g, tc.took*bucket)
			if err != nil {
				t.Fatal(err)
			}
			if change.Load() {
				t.Fatal("the change did not land in the charge")
			}
			tk.Cancel() // its work did not run
			if _, err := admitEstimated(&g, tc.doesNotFit*bucket); err == nil {
				t.Errorf("%v of a bucket admitted after the give-back: more came back than the launch took", tc.doesNotFit)
			}
			if _, err := admitEstimated(&g, tc.fits*bucket); err != nil {
				t.Errorf("%v of a bucket refused after the give-back: less came back than the launch took: %v", tc.fits, err)
			}
		})
	}
}

// admitEstimated admits, without waiting, a launch whose GPU time is
// estimated at ns.
func admitEstimated(g *Gate, ns float64) (Ticket, error) {
	var es Estimates
	w := work(&es)
	es.For(w.Grid, w.Block).add(ns)
	var tk Ticket
	err := g.TryAdmit(&w, &tk)
	return tk, err
}
