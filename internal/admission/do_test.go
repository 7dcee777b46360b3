package admission

import (
	"reflect"
	"testing"
)

// BenchmarkDoKey is the cost of finding a Do's estimate by its call site
// (f's code pointer, then the map), paid once per Do on a metered tenant;
// fcsp's BenchmarkDo metered cases include it.
func BenchmarkDoKey(b *testing.B) {
	var dm doMeter
	f := func() error { return nil }
	var e *Estimate
	for b.Loop() {
		e = dm.estimate(FuncKey(f))
	}
	if e == nil {
		b.Fatal("no estimate")
	}
}

func named() error { return nil }

var n int

// site makes a closure at one site (not inlined: an inlined copy is a
// site of its own, for reflect too).
//
//go:noinline
func site() func() error { return func() error { n++; return nil } }

// FuncKey is reflect's code pointer, so a Do's estimates are kept under the
// same key as before: one per call site, shared by the closures it makes.
func TestFuncKeyIsTheCodePointer(t *testing.T) {
	a, b := site(), site()
	for _, f := range []func() error{named, a, b, func() error { return nil }} {
		if got, want := FuncKey(f), reflect.ValueOf(f).Pointer(); got != want {
			t.Fatalf("FuncKey %#x, reflect %#x", got, want)
		}
	}
	if FuncKey(a) != FuncKey(b) {
		t.Fatal("two closures of one site got different keys")
	}
	if FuncKey(a) == FuncKey(named) {
		t.Fatal("two sites share a key")
	}
	if n := testing.AllocsPerRun(100, func() { _ = FuncKey(func() error { n++; return nil }) }); n != 0 {
		t.Fatalf("FuncKey made %v allocations", n)
	}
}
