package ptxsig

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/fcsp-go/fcsp-go/internal/errs"
)

// A launch's packed arguments must lie where the kernel reads them; the
// zero Layout (a cubin's kernel) checks nothing, and a kernel without
// parameters takes none.
func TestLayoutCheck(t *testing.T) {
	chain := Signature{{".u64", 8, 8}, {".u32", 4, 4}, {".u32", 4, 4}}.Layout()
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
		{"unchecked", Layout{}, []uint32{0}, 4, true},
		{"no parameters", Signature{}.Layout(), nil, 0, true},
		{"no parameters, one given", Signature{}.Layout(), []uint32{0}, 4, false},
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
	ls := Layouts(image)
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
	if ls := Layouts([]byte{0x7f, 'E', 'L', 'F', 2, 1}); ls != nil {
		t.Fatalf("a cubin's layouts: %v", ls)
	}
}
