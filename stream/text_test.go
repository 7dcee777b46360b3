package stream

import (
	"encoding/json"
	"testing"
)

// Issue 38 #9: maps keyed by Class (Stats.GPUTimeByClass) marshal to JSON
// by the names the metrics use, not as numbers ({"0":239566}), and back;
// the numbers earlier releases wrote still read, and names read as Parse
// reads them.
func TestClassMarshalsByName(t *testing.T) {
	in := map[Class]int{Default: 239566, Attention: 2, Memcpy: 3, NCCL: 4}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"attention":2,"default":239566,"memcpy":3,"nccl":4}`; string(b) != want {
		t.Fatalf("marshalled %s, want %s", b, want)
	}
	var out map[Class]int
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("round trip: %v, want %v", out, in)
	}
	for c, n := range in {
		if out[c] != n {
			t.Fatalf("round trip: %v, want %v", out, in)
		}
	}
	var old map[Class]int
	if err := json.Unmarshal([]byte(`{"0":239566,"3":4,"Memcpy":1}`), &old); err != nil || old[Default] != 239566 || old[NCCL] != 4 || old[Memcpy] != 1 {
		t.Fatalf("the numbers earlier releases wrote: %v, %v", old, err)
	}
	for _, bad := range []string{`{"gemm":1}`, `{"4":1}`, `{"class(9)":1}`, `{"":1}`} {
		var m map[Class]int
		if err := json.Unmarshal([]byte(bad), &m); err == nil {
			t.Fatalf("%s read as %v; want an error", bad, m)
		}
	}
	// A class outside the defined ones marshals by its String, never fails.
	if b, err := json.Marshal(map[Class]int{Class(9): 1}); err != nil || string(b) != `{"class(9)":1}` {
		t.Fatalf("an unknown class: %s, %v", b, err)
	}
	// As a value too.
	var v struct{ C Class }
	if err := json.Unmarshal([]byte(`{"C":"memcpy"}`), &v); err != nil || v.C != Memcpy {
		t.Fatalf("a Class field: %v, %v", v.C, err)
	}
	if b, err := json.Marshal(v); err != nil || string(b) != `{"C":"memcpy"}` {
		t.Fatalf("a Class field: %s, %v", b, err)
	}
}
