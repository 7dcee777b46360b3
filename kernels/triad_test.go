package kernels

import (
	"encoding/binary"
	"math"
	"regexp"
	"testing"
)

func floats(v ...float32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}

func TestCheckTriad(t *testing.T) {
	b, c := floats(1, 2, 3, -4), floats(0.5, 0.25, 1e-3, 8)
	a := floats(TriadValue(3, 1, 0.5), TriadValue(3, 2, 0.25), TriadValue(3, 3, 1e-3), TriadValue(3, -4, 8))
	if err := CheckTriad(a, b, c, 3); err != nil {
		t.Fatal(err)
	}
	if TriadValue(3, -4, 8) != 20 {
		t.Fatalf("triad of -4 + 3*8 is %v", TriadValue(3, -4, 8))
	}
	binary.LittleEndian.PutUint32(a[8:], math.Float32bits(3.5))
	if err := CheckTriad(a, b, c, 3); err == nil {
		t.Fatal("a wrong element passed the check")
	}
	if err := CheckTriad(a[:4], b, c, 3); err == nil {
		t.Fatal("arrays of different lengths passed the check")
	}
	if TriadBytes(1<<20) != 12<<20 {
		t.Fatal("TriadBytes")
	}
}

// The hand-written PTX: a header the driver takes, the entry and its five
// parameters in the order of triad.cu, balanced braces, every register
// used declared within its count, every branch target defined.
func TestTriadPTXShape(t *testing.T) {
	src := string(TriadPTX)
	if !regexp.MustCompile(`(?m)^\.version 8\.0\s+\.target sm_80\s+\.address_size 64`).MatchString(src) {
		t.Fatal("triad.ptx: header")
	}
	params := regexp.MustCompile(`\.param \.(\w+) triad_param_(\d)`).FindAllStringSubmatch(src, -1)
	want := []string{"u64", "u64", "u64", "f32", "u32"}
	if len(params) != len(want) {
		t.Fatalf("triad.ptx: %d parameters, want %d", len(params), len(want))
	}
	for i, p := range params {
		if p[1] != want[i] || p[2] != string(rune('0'+i)) {
			t.Fatalf("triad.ptx: parameter %d is .%s triad_param_%s, want .%s", i, p[1], p[2], want[i])
		}
	}
	if o, c := regexp.MustCompile(`\{`).FindAllStringIndex(src, -1), regexp.MustCompile(`\}`).FindAllStringIndex(src, -1); len(o) != len(c) {
		t.Fatal("triad.ptx: unbalanced braces")
	}
	decl := map[string]int{}
	for _, m := range regexp.MustCompile(`\.reg \.\w+\s+%(\w+)<(\d+)>`).FindAllStringSubmatch(src, -1) {
		n := 0
		for _, ch := range m[2] {
			n = 10*n + int(ch-'0')
		}
		decl[m[1]] = n
	}
	for _, m := range regexp.MustCompile(`%(p|f|r|rd)(\d+)\b`).FindAllStringSubmatch(src, -1) {
		n := 0
		for _, ch := range m[2] {
			n = 10*n + int(ch-'0')
		}
		if lim, ok := decl[m[1]]; !ok || n >= lim {
			t.Fatalf("triad.ptx: %%%s%s used, %d declared", m[1], m[2], lim)
		}
	}
	labels := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^(\$\w+):`).FindAllStringSubmatch(src, -1) {
		labels[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`bra\s+(\$\w+);`).FindAllStringSubmatch(src, -1) {
		if !labels[m[1]] {
			t.Fatalf("triad.ptx: branch to undefined %s", m[1])
		}
	}
}
