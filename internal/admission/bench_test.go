package admission

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/stream"
)

// BenchmarkAdmit is one launch's admission on a limited stream that is
// never short of tokens: under a launch-rate limit, at 1 and below it
// (the path of every launch of a WithSMLimit tenant, untimed).
func BenchmarkAdmit(b *testing.B) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"launch-rate", Config{SMLimit: 1, SMs: 132, ThreadsPerSM: 2048, Refill: time.Millisecond}},
		{"launch-rate-0.5", Config{SMLimit: 0.5, SMs: 132, ThreadsPerSM: 2048, Refill: time.Millisecond}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			g := benchGate(b, tc.cfg, new(events))
			var es Estimates
			ctx := context.Background()
			for b.Loop() {
				var w Work
				var tk Ticket
				w.Of(one3, one3, &es, &noBytes)
				if err := g.Admit(ctx, &w, &tk); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAdmitTimed is one launch's admission and timing on a metered
// stream (the events' completion read back at the next admission): under
// a GPU share of 1, a floor with no latency tenant busy, and metering
// alone on a latency tenant.
func BenchmarkAdmitTimed(b *testing.B) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"share1", Config{GPUShare: 1, Metered: true, Refill: time.Millisecond}},
		{"share0.5", Config{GPUShare: 0.5, Metered: true, Refill: time.Millisecond}},
		{"share1-floored-idle", Config{GPUShare: 1, Floor: 0.25, Metered: true, Refill: time.Millisecond}},
		{"metered-latency", Config{Metered: true, Latency: true}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ev := new(events)
			ev.done, ev.ms = true, 0.0001
			g := benchGate(b, tc.cfg, ev)
			var es Estimates
			ctx := context.Background()
			for b.Loop() {
				var w Work
				var tk Ticket
				w.Of(one3, one3, &es, &noBytes)
				if err := g.Admit(ctx, &w, &tk); err != nil {
					b.Fatal(err)
				}
				if err := tk.Time(0, queued); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAdmitQueueBound is a metered launch's admission and timing
// (as BenchmarkAdmitTimed's metered case, on a throughput class: metered,
// not limited) with the queue bound off, the baseline, and on with a
// horizon it never reaches: what the bound's look and prediction cost an
// admission that does not wait. streams is how many metered streams the
// tenant has (the look polls them all).
func BenchmarkAdmitQueueBound(b *testing.B) {
	for _, streams := range []int{1, 8} {
		for _, bound := range []time.Duration{0, time.Hour} {
			name := "off"
			if bound > 0 {
				name = "on"
			}
			b.Run(fmt.Sprintf("streams=%d/bound=%s", streams, name), func(b *testing.B) {
				ev := new(events)
				ev.done, ev.ms = true, 0.0001
				g := benchGate(b, Config{Metered: true}, ev)
				for range streams - 1 {
					var o Gate
					var hv atomic.Uintptr
					var closed atomic.Bool
					if err := g.t.Init(&o, stream.Default, &hv, &closed); err != nil {
						b.Fatal(err)
					}
				}
				if err := g.t.SetQueueBound(bound); err != nil {
					b.Fatal(err)
				}
				var es Estimates
				ctx := context.Background()
				for b.Loop() {
					var w Work
					var tk Ticket
					w.Of(one3, one3, &es, &noBytes)
					if err := g.Admit(ctx, &w, &tk); err != nil {
						b.Fatal(err)
					}
					if err := tk.Time(0, queued); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

var one3 = cuda.Dim3{X: 1, Y: 1, Z: 1}

// benchGate is a default-class stream's gate of a tenant of cfg, its
// events ev.
func benchGate(b *testing.B, cfg Config, ev *events) *Gate {
	cfg.Events, cfg.Host = ev, new(host)
	tn, err := NewTenant(new(Pool), cfg)
	if err != nil {
		b.Fatal(err)
	}
	g := new(Gate)
	var hv atomic.Uintptr
	var closed atomic.Bool
	if err := tn.Init(g, stream.Default, &hv, &closed); err != nil {
		b.Fatal(err)
	}
	return g
}
