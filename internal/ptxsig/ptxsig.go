// Package ptxsig reads the parameter lists of a PTX module's kernels, so
// that a launch whose arguments do not match is refused before the device
// sees it (on the H200 a kernel given one int where it reads a pointer
// faults the device: CUDA_ERROR_ILLEGAL_ADDRESS, every context of the
// process lost).
//
// It reads the text as the driver's PTX front end does, and nothing more:
// one pass over the tokens, `//` and `/* */` comments and string literals
// skipped, up to the first NUL byte (the driver takes the image as a C
// string). An image is PTX text when its first token is .version, as every
// PTX module's must be; anything else (a cubin, a fatbin, or text the
// driver refuses) is the driver's to judge, and its kernels are not
// checked. In PTX text, what the reader cannot read in a kernel's
// declaration is refused with an *Error that says where and what was
// expected: a parameter it misread would let a wrong launch through, so it
// never guesses. Every size and offset is checked against the driver's
// limit on a kernel's parameters (MaxParamBytes) before it is added.
package ptxsig

import (
	"fmt"
	"strings"

	"github.com/fcsp-go/fcsp-go/internal/errs"
)

// MaxParamBytes is the most a kernel's parameters may take: 32764 bytes
// since PTX ISA 8.1 (CUDA 12.1, Volta and later; 4096 before). ptxas
// refuses a kernel whose parameters need more, so a larger size can only
// be a wrong one.
const MaxParamBytes = 32764

// Param is one kernel parameter as PTX declares it, and where a launch's
// packed arguments put it.
type Param struct {
	Name   string
	Type   string // the element type: ".u64", ".f32", ".b8" (a struct's bytes), ...
	Count  uint32 // elements: 1 for a scalar, the product of an array's dimensions
	Size   uint32 // bytes: the type's size times Count
	Align  uint32 // bytes: .align where given, else the type's size
	Offset uint32 // where the parameter starts: the end of the one before, rounded up to Align
}

// Signature is a kernel's parameters in order.
type Signature []Param

func (s Signature) String() string {
	parts := make([]string, len(s))
	for i, p := range s {
		if p.Count > 1 {
			parts[i] = fmt.Sprintf(".align %d %s[%d]", p.Align, p.Type, p.Count)
		} else {
			parts[i] = p.Type
		}
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// End is where the last parameter ends: the bytes a launch packs.
func (s Signature) End() uint32 {
	if len(s) == 0 {
		return 0
	}
	last := s[len(s)-1]
	return last.Offset + last.Size
}

// Parse reads every .entry of a PTX text image. ptx is false for an image
// that is not PTX text (it does not begin with .version: a cubin, a fatbin
// or text the driver refuses), whose kernels are not checked. An error is
// an *Error and matches errs.ErrInvalidArgument.
func Parse(image []byte) (sigs map[string]Signature, ptx bool, err error) {
	return read(image)
}

// Layout is the parameter layout a launch's arguments must have: where
// each parameter starts and where the last ends. The zero Layout checks
// nothing (a kernel not from PTX text: the driver's to check).
type Layout struct {
	offs []uint32
	end  uint32
	sig  string
}

// Layouts are the parameter layouts of a module image's kernels, by name:
// nil for an image that is not PTX text (Parse), whose kernels are not
// checked; an *Error where the image is PTX text that cannot be read.
func Layouts(image []byte) (map[string]Layout, error) {
	sigs, ptx, err := Parse(image)
	if !ptx || err != nil {
		return nil, err
	}
	ls := make(map[string]Layout, len(sigs))
	for name, sig := range sigs {
		ls[name] = sig.Layout()
	}
	return ls, nil
}

// Layout is the layout a launch of a kernel with these parameters reads.
func (s Signature) Layout() Layout {
	l := Layout{sig: s.String(), offs: make([]uint32, len(s)), end: s.End()}
	for i, p := range s {
		l.offs[i] = p.Offset
	}
	return l
}

// Check refuses, with errs.ErrInvalidArgument, packed arguments (their
// offsets, and n bytes in all) that do not lie where kernel reads its
// parameters: a wrong count or size reaches the device otherwise, and a
// kernel that reads a pointer where an int was put faults it for every
// tenant.
func (l *Layout) Check(kernel string, got []uint32, n int) error {
	if l.offs == nil && l.sig == "" {
		return nil // not PTX text: the driver's to check
	}
	ok := len(got) == len(l.offs) && n >= 0 && uint64(n) == uint64(l.end)
	for i := 0; ok && i < len(got); i++ {
		ok = got[i] == l.offs[i]
	}
	if !ok {
		return fmt.Errorf("%w: launch of %q with %d parameters in %d bytes; the kernel takes %s, %d parameters in %d bytes (Ptr, Uint64: 8 bytes; Int32, Uint32, Float32: 4)",
			errs.ErrInvalidArgument, kernel, len(got), n, l.sig, len(l.offs), l.end)
	}
	return nil
}
