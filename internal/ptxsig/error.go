package ptxsig

import (
	"bytes"
	"fmt"

	"github.com/fcsp-go/fcsp-go/internal/errs"
)

// Error is PTX text the reader cannot read: where, and what it expected.
// It matches errs.ErrInvalidArgument (fcsp.ErrInvalidArgument): the image
// is the caller's argument, and the driver would refuse it or, worse, read
// it otherwise than the launch check did.
type Error struct {
	Offset int    // bytes from the image's start
	Line   int    // from 1
	Column int    // from 1, in bytes
	Kernel string // the .entry being read; "" outside one
	Msg    string // what was expected and what was found
}

func (e *Error) Error() string {
	in := ""
	if e.Kernel != "" {
		in = " in .entry " + e.Kernel
	}
	return fmt.Sprintf("%v: PTX line %d, column %d (byte %d)%s: %s", errs.ErrInvalidArgument, e.Line, e.Column, e.Offset, in, e.Msg)
}

func (e *Error) Unwrap() error { return errs.ErrInvalidArgument }

// errorAt is an *Error at byte off of src, its line and column counted
// once, here.
func errorAt(src []byte, off int, kernel, format string, args ...any) *Error {
	off = min(off, len(src))
	line := 1 + bytes.Count(src[:off], []byte{'\n'})
	col := off - (bytes.LastIndexByte(src[:off], '\n') + 1) + 1
	return &Error{Offset: off, Line: line, Column: col, Kernel: kernel, Msg: fmt.Sprintf(format, args...)}
}
