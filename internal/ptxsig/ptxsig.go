// Package ptxsig reads the parameter lists of a PTX module's kernels, so
// that a launch whose arguments do not match is refused before the device
// sees it (on the H200 a kernel given one int where it reads a pointer
// faults the device: CUDA_ERROR_ILLEGAL_ADDRESS, every context of the
// process lost).
package ptxsig

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/fcsp-go/fcsp-go/internal/errs"
)

// Param is one kernel parameter as PTX declares it.
type Param struct {
	Type  string // ".u64", ".f32", ".b8" (an array, for a struct), ...
	Size  int    // bytes
	Align int    // bytes
}

// Signature is a kernel's parameters in order.
type Signature []Param

func (s Signature) String() string {
	parts := make([]string, len(s))
	for i, p := range s {
		if strings.HasPrefix(p.Type, ".b8") && p.Size > 1 {
			parts[i] = fmt.Sprintf(".align %d .b8[%d]", p.Align, p.Size)
		} else {
			parts[i] = p.Type
		}
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// Offsets are the parameters' offsets when each is aligned to its
// alignment, and the end of the last: the layout cuLaunchKernel reads.
func (s Signature) Offsets() (offs []uint32, end uint32) {
	n := 0
	for _, p := range s {
		a := max(p.Align, 1)
		n = (n + a - 1) / a * a
		offs = append(offs, uint32(n))
		n += p.Size
	}
	return offs, uint32(n)
}

var scalar = map[string]int{
	".b8": 1, ".u8": 1, ".s8": 1,
	".b16": 2, ".u16": 2, ".s16": 2, ".f16": 2, ".bf16": 2,
	".b32": 4, ".u32": 4, ".s32": 4, ".f32": 4,
	".b64": 8, ".u64": 8, ".s64": 8, ".f64": 8,
}

// Parse reads every .entry of a PTX text image. ok is false for an image
// that is not PTX text (a cubin or fatbin), whose kernels are not checked.
// An entry whose parameter list it cannot read is left out (not refused).
func Parse(image []byte) (sigs map[string]Signature, ok bool) {
	if !bytes.Contains(image, []byte(".version")) || !bytes.Contains(image, []byte(".target")) {
		return nil, false
	}
	text := string(image)
	sigs = map[string]Signature{}
	for {
		i := strings.Index(text, ".entry")
		if i < 0 {
			return sigs, true
		}
		text = text[i+len(".entry"):]
		open := strings.IndexByte(text, '(')
		body := strings.IndexByte(text, '{')
		name := strings.TrimSpace(text[:max(min(open, body), 0)])
		if open < 0 || body >= 0 && body < open {
			// No parameter list: a kernel of no parameters.
			if body >= 0 && name != "" {
				sigs[name] = Signature{}
			}
			continue
		}
		end := strings.IndexByte(text[open:], ')')
		if end < 0 {
			return sigs, true
		}
		list := text[open+1 : open+end]
		text = text[open+end:]
		if sig, ok := parseList(list); ok && name != "" {
			sigs[name] = sig
		}
	}
}

// parseList reads ".param .u64 a, .param .align 8 .b8 s[16], ...".
func parseList(list string) (Signature, bool) {
	sig := Signature{}
	for _, decl := range strings.Split(list, ",") {
		f := strings.Fields(decl)
		if len(f) == 0 {
			continue
		}
		if f[0] != ".param" {
			return nil, false
		}
		f = f[1:]
		align := 0
		for len(f) >= 2 && (f[0] == ".align" || strings.HasPrefix(f[0], ".ptr")) {
			if f[0] == ".align" {
				a, err := strconv.Atoi(f[1])
				if err != nil {
					return nil, false
				}
				align, f = a, f[2:]
			} else {
				f = f[1:]
			}
		}
		if len(f) < 2 {
			return nil, false
		}
		size, ok := scalar[f[0]]
		if !ok {
			return nil, false
		}
		p := Param{Type: f[0], Size: size, Align: size}
		name := strings.Join(f[1:], "")
		if lb := strings.IndexByte(name, '['); lb >= 0 {
			n, err := strconv.Atoi(strings.TrimSuffix(name[lb+1:], "]"))
			if err != nil || n <= 0 {
				return nil, false
			}
			p.Size = size * n
		}
		if align > 0 {
			p.Align = align
		}
		sig = append(sig, p)
	}
	return sig, true
}

// Layout is the parameter layout a launch's arguments must have: where
// each parameter starts and where the last ends, as Signature.Offsets
// says. The zero Layout checks nothing (a kernel not from PTX text: the
// driver's to check).
type Layout struct {
	offs []uint32
	end  uint32
	sig  string
}

// Layouts are the parameter layouts of a module image's kernels, by name;
// nil for an image that is not PTX text (Parse), whose kernels are not
// checked: a kernel not listed has the zero Layout.
func Layouts(image []byte) map[string]Layout {
	sigs, ok := Parse(image)
	if !ok {
		return nil
	}
	ls := make(map[string]Layout, len(sigs))
	for name, sig := range sigs {
		ls[name] = sig.Layout()
	}
	return ls
}

// Layout is the layout a launch of a kernel with these parameters reads.
func (s Signature) Layout() Layout {
	l := Layout{sig: s.String()}
	l.offs, l.end = s.Offsets()
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
	ok := len(got) == len(l.offs) && uint32(n) == l.end
	for i := 0; ok && i < len(got); i++ {
		ok = got[i] == l.offs[i]
	}
	if !ok {
		return fmt.Errorf("%w: launch of %q with %d parameters in %d bytes; the kernel takes %s, %d parameters in %d bytes (Ptr, Uint64: 8 bytes; Int32, Uint32, Float32: 4)",
			errs.ErrInvalidArgument, kernel, len(got), n, l.sig, len(l.offs), l.end)
	}
	return nil
}
