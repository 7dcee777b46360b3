package ptxsig

import (
	"bytes"
	"fmt"
	"math/bits"
	"strconv"
)

// The reader is one pass. Outside kernel declarations it looks at a byte
// only to skip comments and strings, count braces and find ".entry"; a
// declaration (".entry name (params) directives {") is read token by
// token, strictly. Nothing is read twice, so the time is linear in the
// text whatever it holds.

// scalarType is a parameter type's name and size in bytes, for the types
// a kernel parameter may have (the name a constant: no allocation).
func scalarType(b []byte) (string, uint32, bool) {
	switch string(b) {
	case ".b8":
		return ".b8", 1, true
	case ".u8":
		return ".u8", 1, true
	case ".s8":
		return ".s8", 1, true
	case ".b16":
		return ".b16", 2, true
	case ".u16":
		return ".u16", 2, true
	case ".s16":
		return ".s16", 2, true
	case ".f16":
		return ".f16", 2, true
	case ".bf16":
		return ".bf16", 2, true
	case ".b32":
		return ".b32", 4, true
	case ".u32":
		return ".u32", 4, true
	case ".s32":
		return ".s32", 4, true
	case ".f32":
		return ".f32", 4, true
	case ".f16x2":
		return ".f16x2", 4, true
	case ".bf16x2":
		return ".bf16x2", 4, true
	case ".b64":
		return ".b64", 8, true
	case ".u64":
		return ".u64", 8, true
	case ".s64":
		return ".s64", 8, true
	case ".f64":
		return ".f64", 8, true
	case ".b128":
		return ".b128", 16, true
	}
	return "", 0, false
}

// special marks the bytes the scan stops at.
var special = func() (t [256]bool) {
	for _, c := range []byte(`/"{}.`) {
		t[c] = true
	}
	return t
}()

func identStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '$' || c == '%'
}

func identChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$'
}

type reader struct {
	src    []byte // the image up to its first NUL
	pos    int
	depth  int // braces open
	opened int // where the outermost open brace is
	kernel string
	sigs   map[string]Signature
	slab   []Param // every signature's parameters, one after another
}

func read(image []byte) (map[string]Signature, bool, error) {
	if i := bytes.IndexByte(image, 0); i >= 0 {
		image = image[:i] // the driver reads a C string
	}
	r := &reader{src: image}
	if t, err := r.next(); err != nil || t.kind != tDirective || t.text(image) != ".version" {
		return nil, false, nil // not PTX text: the driver's
	}
	r.sigs = map[string]Signature{}
	if err := r.scan(); err != nil {
		return nil, true, err
	}
	return r.sigs, true, nil
}

func (r *reader) fail(off int, format string, args ...any) error {
	return errorAt(r.src, off, r.kernel, format, args...)
}

// scan reads to the end: comments, strings and braces, and each .entry's
// declaration.
func (r *reader) scan() error {
	src := r.src
	for {
		pos := r.pos
		for pos < len(src) && !special[src[pos]] {
			pos++
		}
		r.pos = pos
		if pos >= len(src) {
			break
		}
		switch src[pos] {
		case '/':
			if _, err := r.comment(); err != nil {
				return err
			}
		case '"':
			if err := r.str(); err != nil {
				return err
			}
		case '{':
			if r.depth == 0 {
				r.opened = pos
			}
			r.depth++
			r.pos++
		case '}':
			if r.depth == 0 {
				return r.fail(pos, "} closes no {")
			}
			r.depth--
			r.pos++
		case '.':
			if !r.atEntry() {
				r.pos++
				continue
			}
			if r.depth > 0 {
				return r.fail(pos, ".entry inside a { } block (opened at %s); a kernel is declared at module scope", r.lineOf(r.opened))
			}
			if err := r.entry(); err != nil {
				return err
			}
		}
	}
	if r.depth > 0 {
		return r.fail(r.opened, "{ never closed: the text ends inside it")
	}
	return nil
}

// atEntry reports whether the directive .entry starts at r.pos.
func (r *reader) atEntry() bool {
	const d = ".entry"
	src, end := r.src, r.pos+len(d)
	return end <= len(src) && src[r.pos+1] == 'e' && string(src[r.pos:end]) == d && (end == len(src) || !identChar(src[end]))
}

func (r *reader) lineOf(off int) string {
	e := errorAt(r.src, off, "", "")
	return fmt.Sprintf("line %d, column %d", e.Line, e.Column)
}

// comment skips a comment at r.pos ('/' there), or the lone '/'; it
// reports whether there was a comment.
func (r *reader) comment() (bool, error) {
	src, at := r.src, r.pos
	if at+1 < len(src) {
		switch src[at+1] {
		case '/':
			if nl := bytes.IndexByte(src[at+2:], '\n'); nl >= 0 {
				r.pos = at + 2 + nl + 1
			} else {
				r.pos = len(src)
			}
			return true, nil
		case '*':
			end := bytes.Index(src[at+2:], []byte("*/"))
			if end < 0 {
				return false, r.fail(at, "/* never closed: the text ends inside the comment")
			}
			r.pos = at + 2 + end + 2
			return true, nil
		}
	}
	r.pos++
	return false, nil
}

// str skips a string literal at r.pos; it must close on its line.
func (r *reader) str() error {
	src, at := r.src, r.pos
	for i := at + 1; i < len(src); i++ {
		switch src[i] {
		case '\\':
			i++
		case '"':
			r.pos = i + 1
			return nil
		case '\n':
			return r.fail(at, "string not closed on its line")
		}
	}
	return r.fail(at, "string never closed: the text ends inside it")
}

// Tokens of a declaration.
type kind int

const (
	tEOF       kind = iota
	tDirective      // .param
	tIdent          // name, %r1, $L
	tNumber         // 16, 0x10
	tString         // "nounroll"
	tPunct          // one byte: ( ) [ ] , ; { } or any other
)

type token struct {
	kind       kind
	start, end int
}

func (t token) text(src []byte) string { return string(src[t.start:t.end]) }

func (t token) is(src []byte, s string) bool { return string(src[t.start:t.end]) == s }

// describe says what a token is, for a message: at most 40 bytes of it.
func (r *reader) describe(t token) string {
	if t.kind == tEOF {
		return "the end of the text"
	}
	s := r.src[t.start:t.end]
	if len(s) > 40 {
		return strconv.Quote(string(s[:40])) + "..."
	}
	return strconv.Quote(string(s))
}

// next lexes the token at r.pos, after spaces and comments.
func (r *reader) next() (token, error) {
	src := r.src
	for r.pos < len(src) {
		c := src[r.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f':
			r.pos++
			continue
		case c == '/':
			if ok, err := r.comment(); err != nil {
				return token{}, err
			} else if ok {
				continue
			}
			return token{tPunct, r.pos - 1, r.pos}, nil
		}
		start := r.pos
		switch {
		case c == '"':
			if err := r.str(); err != nil {
				return token{}, err
			}
			return token{tString, start, r.pos}, nil
		case c == '.' && r.pos+1 < len(src) && identChar(src[r.pos+1]):
			r.pos++
			for r.pos < len(src) && identChar(src[r.pos]) {
				r.pos++
			}
			return token{tDirective, start, r.pos}, nil
		case identStart(c):
			r.pos++
			for r.pos < len(src) && identChar(src[r.pos]) {
				r.pos++
			}
			return token{tIdent, start, r.pos}, nil
		case c >= '0' && c <= '9':
			for r.pos < len(src) && identChar(src[r.pos]) {
				r.pos++
			}
			return token{tNumber, start, r.pos}, nil
		}
		r.pos++
		return token{tPunct, start, r.pos}, nil
	}
	return token{tEOF, len(src), len(src)}, nil
}

// entry reads the declaration at r.pos (".entry"):
//
//	.entry name [( [param {, param}] )] {directive {operand}} ( { | ; )
//
// and leaves r.pos after its '{' (inside the body) or ';'.
func (r *reader) entry() error {
	at := r.pos
	r.pos += len(".entry")
	defer func() { r.kernel = "" }()
	t, err := r.next()
	if err != nil {
		return err
	}
	if t.kind != tIdent || r.src[t.start] == '%' {
		return r.fail(t.start, "expected the kernel's name after .entry, found %s", r.describe(t))
	}
	name := t.text(r.src)
	r.kernel = name
	if t, err = r.next(); err != nil {
		return err
	}
	sig := Signature{}
	if t.kind == tPunct && t.is(r.src, "(") {
		if sig, err = r.params(); err != nil {
			return err
		}
		if t, err = r.next(); err != nil {
			return err
		}
	}
	// Performance directives (.maxntid 256, 1, 1, .minnctapersm 2, ...):
	// a directive and its numbers, strings and commas.
	for t.kind == tDirective {
		for {
			if t, err = r.next(); err != nil {
				return err
			}
			if t.kind != tNumber && t.kind != tString && !(t.kind == tPunct && t.is(r.src, ",")) {
				break
			}
		}
	}
	switch {
	case t.kind == tPunct && t.is(r.src, "{"):
		r.depth, r.opened = 1, t.start
	case t.kind == tPunct && t.is(r.src, ";"):
	default:
		return r.fail(t.start, "expected the parameter list's (, a performance directive (.maxntid, ...), the body's { or ;, found %s", r.describe(t))
	}
	if first, dup := r.sigs[name]; dup {
		if first.String() != sig.String() {
			return r.fail(at, "a second .entry %s with the parameters %s; an earlier one has %s", name, sig, first)
		}
		return nil
	}
	r.sigs[name] = sig
	return nil
}

// params reads a parameter list after its '(' up to and with its ')'.
// The parameters are appended to the slab, and the signature is their
// run of it, so that a module's kernels share a few allocations.
func (r *reader) params() (Signature, error) {
	t, err := r.next()
	if err != nil {
		return nil, err
	}
	if t.kind == tPunct && t.is(r.src, ")") {
		return Signature{}, nil
	}
	first := len(r.slab)
	var end uint64 // where the last parameter ends
	for {
		p, err := r.param(t, end)
		if err != nil {
			return nil, err
		}
		r.slab = append(r.slab, p)
		end = uint64(p.Offset) + uint64(p.Size)
		if t, err = r.next(); err != nil {
			return nil, err
		}
		switch {
		case t.kind == tPunct && t.is(r.src, ","):
			if t, err = r.next(); err != nil {
				return nil, err
			}
			continue
		case t.kind == tPunct && t.is(r.src, ")"):
			return Signature(r.slab[first:len(r.slab):len(r.slab)]), nil
		}
		return nil, r.fail(t.start, "expected , or ) after parameter %s, found %s", p.Name, r.describe(t))
	}
}

// param reads one parameter, t its first token, placed after end:
//
//	.param [.align N] type [.ptr [space] [.align N]] name {[N]}
func (r *reader) param(t token, end uint64) (Param, error) {
	src := r.src
	if t.kind != tDirective || !t.is(src, ".param") {
		return Param{}, r.fail(t.start, "expected .param, found %s", r.describe(t))
	}
	t, err := r.next()
	if err != nil {
		return Param{}, err
	}
	var align uint64
	if t.kind == tDirective && t.is(src, ".align") {
		if align, err = r.alignment(); err != nil {
			return Param{}, err
		}
		if t, err = r.next(); err != nil {
			return Param{}, err
		}
	}
	typ, size, ok := scalarType(src[t.start:t.end])
	if t.kind != tDirective || !ok {
		return Param{}, r.fail(t.start, "expected a parameter type (.u32, .u64, .f32, .b8, ...), found %s; the launch check reads scalar, pointer and byte-array parameters", r.describe(t))
	}
	p := Param{Type: typ, Count: 1}
	if t, err = r.next(); err != nil {
		return Param{}, err
	}
	if t.kind == tDirective && t.is(src, ".ptr") {
		// A pointer's attributes: its state space and the alignment of
		// what it points to, not of the parameter.
		if t, err = r.next(); err != nil {
			return Param{}, err
		}
		switch string(src[t.start:t.end]) {
		case ".global", ".const", ".shared", ".local":
			if t, err = r.next(); err != nil {
				return Param{}, err
			}
		}
		if t.kind == tDirective && t.is(src, ".align") {
			if _, err = r.alignment(); err != nil {
				return Param{}, err
			}
			if t, err = r.next(); err != nil {
				return Param{}, err
			}
		}
	}
	if t.kind != tIdent || src[t.start] == '%' {
		return Param{}, r.fail(t.start, "expected the parameter's name, found %s", r.describe(t))
	}
	p.Name = t.text(src)
	nameAt := t.start
	count := uint64(1)
	for {
		save := r.pos
		if t, err = r.next(); err != nil {
			return Param{}, err
		}
		if t.kind != tPunct || !t.is(src, "[") {
			r.pos = save // not ours: the caller's , or )
			break
		}
		if t, err = r.next(); err != nil {
			return Param{}, err
		}
		n, err := r.number(t, "an array size")
		if err != nil {
			return Param{}, err
		}
		if n == 0 {
			return Param{}, r.fail(t.start, "array parameter %s of 0 elements; give its size", p.Name)
		}
		hi, lo := bits.Mul64(count, n)
		if hi != 0 || lo > MaxParamBytes/uint64(size) {
			return Param{}, r.fail(t.start, "array parameter %s has more than %d bytes (%s elements of %d); a kernel's parameters take at most %d bytes", p.Name, MaxParamBytes, r.describe(t), size, MaxParamBytes)
		}
		count = lo
		if t, err = r.next(); err != nil {
			return Param{}, err
		}
		if t.kind != tPunct || !t.is(src, "]") {
			return Param{}, r.fail(t.start, "expected ] after the array size, found %s", r.describe(t))
		}
	}
	if align == 0 {
		align = uint64(size)
	}
	// end <= MaxParamBytes, align <= 1<<32: no overflow in 64 bits.
	off := (end + align - 1) &^ (align - 1)
	bytes := count * uint64(size)
	if off+bytes > MaxParamBytes {
		return Param{}, r.fail(nameAt, "parameter %s (%d bytes at offset %d) ends past %d bytes, the most a kernel's parameters may take", p.Name, bytes, off, MaxParamBytes)
	}
	p.Count, p.Size, p.Align, p.Offset = uint32(count), uint32(bytes), uint32(align), uint32(off)
	return p, nil
}

// alignment reads the number after .align: a power of two that fits in
// 32 bits.
func (r *reader) alignment() (uint64, error) {
	t, err := r.next()
	if err != nil {
		return 0, err
	}
	n, err := r.number(t, "an alignment")
	if err != nil {
		return 0, err
	}
	if n == 0 || n&(n-1) != 0 || n > 1<<31 {
		return 0, r.fail(t.start, "alignment %s is not a power of two up to 2^31", r.describe(t))
	}
	return n, nil
}

// number reads a PTX integer literal: decimal, 0x hex, 0b binary or 0
// octal, with an optional U.
func (r *reader) number(t token, what string) (uint64, error) {
	if t.kind != tNumber {
		return 0, r.fail(t.start, "expected %s, found %s", what, r.describe(t))
	}
	s := t.text(r.src)
	digits, base := s, 10
	if len(digits) > 1 && digits[len(digits)-1] == 'U' {
		digits = digits[:len(digits)-1]
	}
	switch {
	case len(digits) > 2 && (digits[:2] == "0x" || digits[:2] == "0X"):
		digits, base = digits[2:], 16
	case len(digits) > 2 && (digits[:2] == "0b" || digits[:2] == "0B"):
		digits, base = digits[2:], 2
	case len(digits) > 1 && digits[0] == '0':
		digits, base = digits[1:], 8
	}
	for i := 0; i < len(digits); i++ { // ParseUint would take _
		if digits[i] == '_' {
			return 0, r.fail(t.start, "expected %s, found %s", what, r.describe(t))
		}
	}
	n, err := strconv.ParseUint(digits, base, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return 0, r.fail(t.start, "%s %s does not fit in 64 bits", what, r.describe(t))
		}
		return 0, r.fail(t.start, "expected %s (a decimal, 0x hex, 0b binary or 0 octal integer), found %s", what, r.describe(t))
	}
	return n, nil
}
