package ptxsig

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/fcsp-go/fcsp-go/internal/errs"
)

// mustSig is the signature of a kernel declared with list.
func mustSig(t *testing.T, list string) Signature {
	t.Helper()
	sigs, ptx, err := Parse([]byte(head + ".entry k(" + list + ") { ret; }"))
	if !ptx || err != nil {
		t.Fatalf("(%s): %v %v", list, ptx, err)
	}
	return sigs["k"]
}

// A launch's packed arguments must lie where the kernel reads them; the
// zero Layout (a cubin's kernel) checks nothing, and a kernel without
// parameters takes none.
func TestLayoutCheck(t *testing.T) {
	chain := mustSig(t, ".param .u64 a, .param .u32 n, .param .u32 s").Layout()
	none := mustSig(t, "").Layout()
	for _, tc := range []struct {
		name string
		l    Layout
		offs []uint32
		n    int
		ok   bool
	}{
		{"match", chain, []uint32{0, 8, 12}, 16, true},
		{"one int", chain, []uint32{0}, 4, false},
		{"one short", chain, []uint32{0, 8}, 12, false},
		{"one more", chain, []uint32{0, 8, 12, 16}, 20, false},
		{"int where a pointer goes", chain, []uint32{0, 4, 8}, 12, false},
		{"8 bytes where 4 go", chain, []uint32{0, 8, 16}, 20, false},
		{"negative length", chain, []uint32{0, 8, 12}, -1, false},
		{"unchecked", Layout{}, []uint32{0}, 4, true},
		{"no parameters", none, nil, 0, true},
		{"no parameters, one given", none, []uint32{0}, 4, false},
	} {
		err := tc.l.Check("k", tc.offs, tc.n)
		if tc.ok != (err == nil) {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if err != nil && (!errors.Is(err, errs.ErrInvalidArgument) || !strings.Contains(err.Error(), `"k"`) || !strings.Contains(err.Error(), tc.l.sig)) {
			t.Errorf("%s: %v does not match ErrInvalidArgument or name the kernel and its signature", tc.name, err)
		}
	}
}

// Layouts lists a PTX image's kernels; a cubin's (not PTX text) are not
// listed, so that their launches are the driver's to check.
func TestLayouts(t *testing.T) {
	image, err := os.ReadFile("../../kernels/chain.ptx")
	if err != nil {
		t.Fatal(err)
	}
	ls, err := Layouts(image)
	if err != nil {
		t.Fatal(err)
	}
	l, ok := ls["chain"]
	if !ok {
		t.Fatalf("no chain in %v", ls)
	}
	if err := l.Check("chain", []uint32{0, 8, 12}, 16); err != nil {
		t.Fatal(err)
	}
	if err := l.Check("chain", []uint32{0}, 4); err == nil {
		t.Fatal("one int passed chain's check")
	}
	for _, img := range []string{"\x7fELF\x02\x01", "\x50\xed\x55\xba\x01\x00", "not PTX", "", "\x00.version 8.0"} {
		if ls, err := Layouts([]byte(img)); ls != nil || err != nil {
			t.Fatalf("%q: layouts %v, %v", img, ls, err)
		}
	}
	if _, err := Layouts([]byte(head + ".entry k(.param .u64 a")); !errors.Is(err, errs.ErrInvalidArgument) {
		t.Fatalf("a list never closed: %v", err)
	}
}
