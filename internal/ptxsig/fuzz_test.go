package ptxsig

import (
	"errors"
	"os"
	"reflect"
	"testing"

	"github.com/fcsp-go/fcsp-go/internal/errs"
)

// FuzzParse: any bytes are read, refused with an *Error that says where
// within the text, or left to the driver; never a panic. What is read is
// a layout the driver could have: each parameter at its alignment after
// the one before, every size its elements', all within MaxParamBytes. And
// what follows a NUL is never read.
func FuzzParse(f *testing.F) {
	for _, p := range []string{"testdata/clang.ptx", "../../kernels/chain.ptx", "../../kernels/triad.ptx"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		head + ".entry k(.param .u64 a // out\n, .param .u32 n) { ret; }",
		head + ".entry k(.param .u64 a[1152921504606846976]) { ret; }",
		head + ".entry k(.param .align 16 .b8 s[24], .param .u64 .ptr .global .align 8 p) .maxntid 1, 1, 1 { ret; }",
		head + "/* .entry */ .entry k() { \"}\" }",
		head + ".entry k(.param .u32 a);\n.entry k(.param .u32 b) {}",
		head + ".entry k",
		"\x7fELF",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, image []byte) {
		sigs, ptx, err := Parse(image)
		if err != nil {
			var pe *Error
			if !ptx || !errors.As(err, &pe) || !errors.Is(err, errs.ErrInvalidArgument) {
				t.Fatalf("ptx %v, error %v (%T)", ptx, err, err)
			}
			if pe.Offset < 0 || pe.Offset > len(image) || pe.Line < 1 || pe.Column < 1 || pe.Msg == "" {
				t.Fatalf("an error out of the text: %+v in %d bytes", pe, len(image))
			}
		}
		if !ptx && (sigs != nil || err != nil) {
			t.Fatalf("not PTX, yet %v, %v", sigs, err)
		}
		for name, s := range sigs {
			var end uint64
			for _, p := range s {
				_, size, ok := scalarType([]byte(p.Type))
				if !ok || p.Align == 0 || p.Align&(p.Align-1) != 0 || uint64(p.Offset)%uint64(p.Align) != 0 ||
					uint64(p.Offset) < end || uint64(p.Offset)-end >= uint64(p.Align) ||
					p.Count == 0 || uint64(p.Size) != uint64(p.Count)*uint64(size) {
					t.Fatalf("%s: parameter %+v after %d bytes", name, p, end)
				}
				end = uint64(p.Offset) + uint64(p.Size)
			}
			if end > MaxParamBytes || end != uint64(s.End()) {
				t.Fatalf("%s: ends at %d (End %d)", name, end, s.End())
			}
		}
		// The driver reads a C string: nothing past a NUL counts.
		sigs2, ptx2, err2 := Parse(append(append(image[:len(image):len(image)], 0), head+".entry zz(.param .u8 c) {}"...))
		if ptx2 != ptx || (err == nil) != (err2 == nil) || err != nil && err.Error() != err2.Error() || !reflect.DeepEqual(sigs, sigs2) {
			t.Fatalf("past a NUL: %v %v %v, then %v %v %v", ptx, err, sigs, ptx2, err2, sigs2)
		}
	})
}
