package admission

import (
	"reflect"
	"testing"
)

// BenchmarkDoKey is the cost of finding a Do's estimate by its call site
// (f's code pointer through reflect, then the map), paid once per Do on a
// metered tenant; fcsp's BenchmarkDo metered cases include it.
func BenchmarkDoKey(b *testing.B) {
	var dm doMeter
	f := func() error { return nil }
	var e *Estimate
	for b.Loop() {
		e = dm.estimate(reflect.ValueOf(f).Pointer())
	}
	if e == nil {
		b.Fatal("no estimate")
	}
}
