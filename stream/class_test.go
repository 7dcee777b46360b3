package stream

import (
	"fmt"
	"testing"
)

func TestClasses(t *testing.T) {
	for _, tc := range []struct {
		c      Class
		name   string
		scale  float64
		bypass bool
	}{
		{Default, "default", 1, false},
		{Attention, "attention", 0.8, false},
		{Memcpy, "memcpy", 0.5, false},
		{NCCL, "nccl", 0, true},
		{Class(9), "class(9)", 1, false},
	} {
		if tc.c.String() != tc.name || tc.c.ThrottleScale() != tc.scale || tc.c.Bypass() != tc.bypass {
			t.Errorf("%d: got %s %v %v, want %s %v %v", tc.c, tc.c, tc.c.ThrottleScale(), tc.c.Bypass(), tc.name, tc.scale, tc.bypass)
		}
		if tc.c.Valid() {
			if p, err := Parse(tc.name); err != nil || p != tc.c {
				t.Errorf("Parse(%q) = %v, %v", tc.name, p, err)
			}
		}
	}
	if _, err := Parse("gemm"); err == nil {
		t.Error("Parse accepted an unknown class")
	}
}

func TestRegistry(t *testing.T) {
	var r Registry
	if _, ok := r.Lookup(1); ok {
		t.Fatal("empty registry found a stream")
	}
	r.Register(0xabc, NCCL)
	r.Register(0xdef, Memcpy)
	if c, ok := r.Lookup(0xabc); !ok || c != NCCL {
		t.Fatalf("Lookup = %v %v", c, ok)
	}
	r.Unregister(0xabc)
	r.Unregister(0x999)
	if _, ok := r.Lookup(0xabc); ok {
		t.Fatal("unregistered stream still found")
	}
	if c, _ := r.Lookup(0xdef); c != Memcpy {
		t.Fatal("other label lost")
	}
}

func BenchmarkLookup(b *testing.B) {
	var r Registry
	for i := 0; i < 64; i++ {
		r.Register(uintptr(i), NCCL)
	}
	for b.Loop() {
		r.Lookup(7)
	}
}

func ExampleClass() {
	fmt.Println(Attention, Attention.ThrottleScale(), NCCL.Bypass())
	// Output: attention 0.8 true
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"default", "NCCL", "Attention", "memcpy", "", "nccl\x00", "class(3)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := Parse(s)
		if err != nil {
			return
		}
		if !c.Valid() {
			t.Fatalf("Parse(%q) returned invalid class %d", s, c)
		}
		if back, err := Parse(c.String()); err != nil || back != c {
			t.Fatalf("round trip of %q: %v %v", s, back, err)
		}
	})
}
