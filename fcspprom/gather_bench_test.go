package fcspprom

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcsptest"
)

// BenchmarkGather is one scrape of a pool with a partitioned class and a
// rest class, as examples/storm's scrape storm makes it, beside Pool.Stats
// alone (the collector's own input) in the same run.
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
}
