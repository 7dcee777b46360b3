package fcspprom

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcsptest"
)

// BenchmarkGather is one scrape of a pool with a partitioned class and a
// rest class, beside Pool.Stats alone (the collector's own input), the two
// bounds on a scrape's cost (WithMaxAge, NewGatherer: examples/storm
// scrapes the latter) and the floors, in the same run.
func BenchmarkGather(b *testing.B) {
	p, err := fcsp.Open(context.Background(), 0, fcsptest.SimulatedH200())
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	inter, err := p.NewTenant("inter", fcsp.WithSMs(16))
	if err != nil {
		b.Fatal(err)
	}
	defer inter.Close()
	batch, err := p.NewTenant("batch", fcsp.WithRestOfSMs())
	if err != nil {
		b.Fatal(err)
	}
	defer batch.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(p))
	b.Run("PoolStats", func(b *testing.B) {
		for b.Loop() {
			_ = p.Stats()
		}
	})
	b.Run("Gather", func(b *testing.B) {
		for b.Loop() {
			if _, err := reg.Gather(); err != nil {
				b.Fatal(err)
			}
		}
	})
	// A registry over a collector that keeps its metrics for a second:
	// the registry still writes and checks every series.
	kept := prometheus.NewRegistry()
	kept.MustRegister(NewCollector(p, WithMaxAge(time.Second)))
	b.Run("Gather/maxAge=1s", func(b *testing.B) {
		for b.Loop() {
			if _, err := kept.Gather(); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The Gatherer: what it gathered, for DefaultMaxAge.
	g := NewGatherer(p)
	b.Run("Gatherer", func(b *testing.B) {
		for b.Loop() {
			if _, err := g.Gather(); err != nil {
				b.Fatal(err)
			}
		}
	})
	var n atomic.Int64
	b.Run("floor=atomic", func(b *testing.B) {
		for b.Loop() {
			n.Add(1)
		}
	})
	b.Run("floor=clock", func(b *testing.B) {
		for b.Loop() {
			_ = time.Now()
		}
	})
}
