package ptxsig

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/smprobe"
	"github.com/fcsp-go/fcsp-go/kernels"
)

const head = ".version 8.0\n.target sm_90\n.address_size 64\n"

// want is a kernel's layout by the CUDA ABI: each parameter at its
// alignment, as testdata/kernels.cu's comments work it out.
type want struct {
	offs []uint32
	end  uint32
	sig  string
}

var kernelsCU = map[string]want{
	"scalars":    {[]uint32{0, 2, 4, 8, 16, 24, 32, 40, 48}, 56, "(.u8, .u16, .u32, .u64, .f32, .f64, .u64, .u8, .u64)"},
	"pointers":   {[]uint32{0, 8, 16, 24}, 28, "(.u32, .u64, .u64, .u32)"},
	"aggregates": {[]uint32{0, 16, 32, 64, 80, 336, 344}, 352, "(.b8, .align 16 .b8[16], .align 8 .b8[32], .align 1 .b8[13], .align 4 .b8[256], .u32, .u64)"},
	"bounded":    {[]uint32{0}, 8, "(.u64)"},
	"none":       {[]uint32{}, 0, "()"},
	"chain":      {[]uint32{0, 8, 12}, 16, "(.u64, .u32, .u32)"},
	"spin":       {[]uint32{0}, 8, "(.u64)"},
	"triad":      {[]uint32{0, 8, 16, 24, 28}, 32, "(.u64, .u64, .u64, .f32, .u32)"},
}

func check(t *testing.T, what string, sigs map[string]Signature, wants map[string]want) {
	t.Helper()
	if len(sigs) != len(wants) {
		t.Errorf("%s: %d kernels read, want %d: %v", what, len(sigs), len(wants), sigs)
	}
	for name, w := range wants {
		s, ok := sigs[name]
		if !ok {
			t.Errorf("%s: no %s", what, name)
			continue
		}
		l := s.Layout()
		if !slices.Equal(l.offs, w.offs) || l.end != w.end || l.sig != w.sig {
			t.Errorf("%s: %s is %s at %v to %d; want %s at %v to %d", what, name, l.sig, l.offs, l.end, w.sig, w.offs, w.end)
		}
	}
}

// Real compiler output: clang's PTX of testdata/kernels.cu, nvcc's of the
// repository's chain kernels, and the hand-written triad.
func TestCompilerOutput(t *testing.T) {
	for _, f := range []struct {
		path    string
		kernels []string
	}{
		{"testdata/clang.ptx", []string{"scalars", "pointers", "aggregates", "bounded", "none", "chain", "spin", "triad"}},
		{"testdata/nvcc.ptx", []string{"scalars", "pointers", "aggregates", "bounded", "none", "chain", "spin", "triad"}},
		{"../../kernels/chain.ptx", []string{"chain", "spin"}},
		{"../../kernels/triad.ptx", []string{"triad"}},
	} {
		image, err := os.ReadFile(f.path)
		if errors.Is(err, os.ErrNotExist) && strings.Contains(f.path, "nvcc") {
			t.Logf("%s: not made yet (testdata/nvcc.sh, where nvcc is installed)", f.path)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sigs, ptx, err := Parse(image)
		if !ptx || err != nil {
			t.Fatalf("%s: ptx %v, %v", f.path, ptx, err)
		}
		wants := map[string]want{}
		for _, k := range f.kernels {
			wants[k] = kernelsCU[k]
		}
		check(t, f.path, sigs, wants)
		// Comments in every position a space may take hide nothing and
		// add nothing; so do CRLF line ends.
		check(t, f.path+" with comments everywhere", mustParse(t, commented(image)), wants)
		check(t, f.path+" with CRLF", mustParse(t, bytes.ReplaceAll(image, []byte("\n"), []byte("\r\n"))), wants)
	}
}

func mustParse(t *testing.T, image []byte) map[string]Signature {
	t.Helper()
	sigs, ptx, err := Parse(image)
	if !ptx || err != nil {
		t.Fatalf("ptx %v, %v", ptx, err)
	}
	return sigs
}

// space is a run of blanks, or a line end.
var space = regexp.MustCompile(`[ \t]+|\n`)

// literal is a string literal (compiler output has them only in .file and
// .pragma, without escapes).
var literal = regexp.MustCompile(`"[^"\n]*"`)

// commented puts comments that look like declarations into every space
// outside strings: a block comment in each run of blanks, a line comment
// before each line end, and comments beside punctuation, where PTX needs
// no space.
func commented(image []byte) []byte {
	const block = "/* .entry evil(.param .u8 x, { */"
	const line = "// ), .param .u64 y[3] } .entry z()"
	var out []byte
	rest := image
	for len(rest) > 0 {
		code, str := rest, []byte(nil)
		if loc := literal.FindIndex(rest); loc != nil {
			code, str = rest[:loc[0]], rest[loc[0]:loc[1]]
			rest = rest[loc[1]:]
		} else {
			rest = nil
		}
		for _, p := range []string{"(", ")", ",", "[", "]", "{"} {
			code = bytes.ReplaceAll(code, []byte(p), []byte("/*"+p+"*/"+p+"/*"+p+"*/"))
		}
		code = space.ReplaceAllFunc(code, func(s []byte) []byte {
			if s[0] == '\n' {
				return []byte(" " + line + "\n" + block)
			}
			return []byte(" " + block + " ")
		})
		out = append(append(out, code...), str...)
	}
	return out
}

// The forms the grammar allows, one at a time.
func TestForms(t *testing.T) {
	src := head + `
.visible .entry none()
{ ret; }
.entry bare
{ ret; }
.weak .entry declared(.param .u32 a);
.entry declared(.param .u32 b) { ret; }
.visible .entry mixed(
	.param .u32 a,
	.param .u64 .ptr .global .align 8 p,
	.param .align 16 .b8 s[24],
	.param .f32 f,
	.param .u64 .ptr.align 16 q,
	.param .b16 h[0x3],
	.param .align 0b100 .b8 m[2][3],
	.param .f16x2 v,
	.param .b128 w
)
.maxntid 256, 1, 1 .minnctapersm 2 .pragma "nounroll"
{
	.reg .b32 %r<2>;
	{ .reg .b32 inner; }
	// .entry hidden(.param .u8 c) {
	/* } .entry hidden2() { */
	ret;
}
.global .align 4 .u32 table[2] = {1, 2};
.entry after(.param .u8 c) { ret; }
`
	sigs := mustParse(t, []byte(src))
	check(t, "forms", sigs, map[string]want{
		"none":     {[]uint32{}, 0, "()"},
		"bare":     {[]uint32{}, 0, "()"},
		"declared": {[]uint32{0}, 4, "(.u32)"},
		// s at 16 (align 16), f at 40, q at 48, h (3 x 2) at 56 to 62, m (6 x 1, align 4) at 64, v at 72, w (16) at 80.
		"mixed": {[]uint32{0, 8, 16, 40, 48, 56, 64, 72, 80}, 96, "(.u32, .u64, .align 16 .b8[24], .f32, .u64, .align 2 .b16[3], .align 4 .b8[6], .f16x2, .b128)"},
		"after": {[]uint32{0}, 1, "(.u8)"},
	})
	// Text past a NUL is not read: the driver reads the image as a C string.
	sigs = mustParse(t, []byte(head+".entry a() { ret; }\x00.entry b(.param .u8 x) { ret; }"))
	if _, ok := sigs["b"]; ok || len(sigs) != 1 {
		t.Errorf("past the NUL: %v", sigs)
	}
	// Comments and strings before .version.
	sigs = mustParse(t, []byte("// made by hand\n/* .entry x() {} */\n"+head+`.file 1 "a { .entry y(" .entry z() { ret; }`))
	if _, ok := sigs["z"]; !ok || len(sigs) != 1 {
		t.Errorf("after a string: %v", sigs)
	}
}

// What the reader cannot read is refused, saying where and what it
// expected.
func TestRefused(t *testing.T) {
	const h = head // 3 lines: declarations start on line 4
	for _, c := range []struct {
		src       string
		line, col int
		msg       string
	}{
		{h + ".entry k(.param .u64 a[1152921504606846976]) {}", 4, 24, "array parameter a has more than 32764 bytes"},
		{h + ".entry k(.param .u64 a[18446744073709551616]) {}", 4, 24, "does not fit in 64 bits"},
		{h + ".entry k(.param .b8 a[4096][4096]) {}", 4, 29, "more than 32764 bytes"},
		{h + ".entry k(.param .b8 a[32000], .param .u64 b[100]) {}", 4, 43, "parameter b (800 bytes at offset 32000) ends past 32764"},
		{h + ".entry k(.param .b8 a[0]) {}", 4, 23, "0 elements"},
		{h + ".entry k(.param .b8 a[]) {}", 4, 23, `expected an array size, found "]"`},
		{h + ".entry k(.param .b8 a[4) {}", 4, 24, `expected ] after the array size, found ")"`},
		{h + ".entry k(.param .align 3 .b8 a[4]) {}", 4, 24, "alignment \"3\" is not a power of two"},
		{h + ".entry k(.param .align 0x100000000 .b8 a[4]) {}", 4, 24, "not a power of two up to 2^31"},
		{h + ".entry k(.param .u128 a) {}", 4, 17, `expected a parameter type (.u32, .u64, .f32, .b8, ...), found ".u128"`},
		{h + ".entry k(.param .texref t) {}", 4, 17, `found ".texref"`},
		{h + ".entry k(.param .v2 .u32 a) {}", 4, 17, `found ".v2"`},
		{h + ".entry k(.reg .u32 a) {}", 4, 10, `expected .param, found ".reg"`},
		{h + ".entry k(.param .u32 a .param .u32 b) {}", 4, 24, `expected , or ) after parameter a, found ".param"`},
		{h + ".entry k(.param .u32 a,) {}", 4, 24, `expected .param, found ")"`},
		{h + ".entry k(.param .u32) {}", 4, 21, `expected the parameter's name, found ")"`},
		{h + ".entry k(.param .u32 a", 4, 23, "after parameter a, found the end of the text"},
		{h + ".entry (.param .u32 a) {}", 4, 8, "expected the kernel's name after .entry"},
		{h + ".entry k(.param .u32 a) ret; }", 4, 25, "expected the parameter list's (, a performance directive"},
		{h + ".entry k() { .entry j() {} }", 4, 14, ".entry inside a { } block (opened at line 4, column 12)"},
		{h + ".entry k() { ret; }}", 4, 20, "} closes no {"},
		{h + ".entry k() {\n ret;\n", 4, 12, "{ never closed"},
		{h + ".entry k(.param .u32 a) {}\n.entry k(.param .u64 a) {}", 5, 1, "a second .entry k with the parameters (.u64); an earlier one has (.u32)"},
		{h + ".entry k(/* .param .u32 a) {}", 4, 10, "/* never closed"},
		{h + ".file 1 \"a\n.entry k() {}", 4, 9, "string not closed on its line"},
		{h + ".file 1 \"a\\\"", 4, 9, "string never closed"},
		{h + ".entry k(.param .u32 a[0x]) {}", 4, 24, "expected an array size (a decimal, 0x hex, 0b binary or 0 octal integer), found \"0x\""},
		{h + ".entry k(.param .u32 a[09]) {}", 4, 24, `found "09"`},
		{h + ".entry k(.param .u32 a[1_0]) {}", 4, 24, `found "1_0"`},
		{h + ".entry k(.param .u32 " + strings.Repeat("x", 100) + " b) {}", 4, 123, `found "b"`},
	} {
		_, ptx, err := Parse([]byte(c.src))
		var pe *Error
		if !ptx || !errors.As(err, &pe) || !errors.Is(err, errs.ErrInvalidArgument) {
			t.Errorf("%q: ptx %v, %v: want an *Error matching ErrInvalidArgument", c.src, ptx, err)
			continue
		}
		if pe.Line != c.line || pe.Column != c.col || !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), fmt.Sprintf("PTX line %d, column %d", c.line, c.col)) {
			t.Errorf("%q:\n  %v (line %d, column %d)\n  want line %d, column %d: %s", c.src, err, pe.Line, pe.Column, c.line, c.col, c.msg)
		}
	}
}

// The repository's own hand-written PTX reads too.
func TestRepositoryPTX(t *testing.T) {
	sigs := mustParse(t, smprobe.PTX)
	check(t, "smprobe.PTX", sigs, map[string]want{"smid": {[]uint32{0, 8}, 16, "(.u64, .u64)"}})
	check(t, "kernels.ChainPTX", mustParse(t, kernels.ChainPTX), map[string]want{"chain": kernelsCU["chain"], "spin": kernelsCU["spin"]})
	check(t, "kernels.TriadPTX", mustParse(t, kernels.TriadPTX), map[string]want{"triad": kernelsCU["triad"]})
}
