package fcsp

import "github.com/fcsp-go/fcsp-go/internal/errs"

var (
	// ErrNotComputed: on the simulator (fcsptest), a launch of a kernel
	// the simulator has no model for. The launch is admitted, ordered and
	// counted like any other, but no memory was written: the simulator runs
	// only the sample kernels (chain, spin) for real. On a GPU it never
	// occurs.
	ErrNotComputed = errs.ErrNotComputed
)
