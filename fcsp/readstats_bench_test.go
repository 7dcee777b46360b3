package fcsp

import "testing"

// BenchmarkReadStats: a metrics scrape of a pool of a reshapable pair (the
// reshape demo's) and an unpartitioned tenant, into a reused PoolStats.
func BenchmarkReadStats(b *testing.B) {
	p := benchPool(b)
	for _, mk := range []func() (*Tenant, error){
		func() (*Tenant, error) { return p.NewTenant("interactive", WithSMs(8), WithReshapeSizes(16, 32)) },
		func() (*Tenant, error) { return p.NewTenant("batch", WithRestOfSMs(), WithReshapeSizes(100)) },
		func() (*Tenant, error) { return p.NewTenant("plain") },
	} {
		if _, err := mk(); err != nil {
			b.Fatal(err)
		}
	}
	var s PoolStats
	b.ReportAllocs()
	for b.Loop() {
		p.ReadStats(&s)
	}
}
