package ptxsig

import (
	"os"
	"testing"
)

func TestParseChain(t *testing.T) {
	image, err := os.ReadFile("../../kernels/chain.ptx")
	if err != nil {
		t.Fatal(err)
	}
	sigs, ok := Parse(image)
	if !ok {
		t.Fatal("chain.ptx not read as PTX")
	}
	sig, found := sigs["chain"]
	if !found {
		t.Fatalf("no chain entry in %v", sigs)
	}
	if got := sig.String(); got != "(.u64, .u32, .u32)" {
		t.Errorf("chain: %s", got)
	}
	offs, end := sig.Offsets()
	if len(offs) != 3 || offs[0] != 0 || offs[1] != 8 || offs[2] != 12 || end != 16 {
		t.Errorf("offsets %v end %d", offs, end)
	}
}

func TestParseForms(t *testing.T) {
	src := `.version 8.0
.target sm_90
.address_size 64
.visible .entry none()
{ ret; }
.entry bare
{ ret; }
.visible .entry mixed(
	.param .u32 a,
	.param .u64 .ptr .global .align 8 p,
	.param .align 16 .b8 s[24],
	.param .f32 f
)
{ ret; }
.entry weird(.param .u128 x) { ret; }
`
	sigs, ok := Parse([]byte(src))
	if !ok {
		t.Fatal("not PTX")
	}
	if s := sigs["none"]; s == nil || len(s) != 0 {
		t.Errorf("none: %v", s)
	}
	if s, ok := sigs["bare"]; !ok || len(s) != 0 {
		t.Errorf("bare: %v %v", s, ok)
	}
	m := sigs["mixed"]
	offs, end := m.Offsets()
	want := []uint32{0, 8, 16, 40}
	if len(offs) != 4 || end != 44 {
		t.Fatalf("mixed: %v offsets %v end %d", m, offs, end)
	}
	for i := range want {
		if offs[i] != want[i] {
			t.Errorf("mixed offset %d: %d, want %d", i, offs[i], want[i])
		}
	}
	if _, ok := sigs["weird"]; ok {
		t.Error("an unknown type was read, not left out")
	}
	if _, ok := Parse([]byte("\x7fELF....")); ok {
		t.Error("a cubin read as PTX")
	}
}
