package fcsp

import "github.com/fcsp-go/fcsp-go/internal/cuda/fake"

// ErrNotComputed: on the simulator (WithSimulator), a launch of a kernel
// the simulator has no model for. The launch is admitted, ordered and
// counted like any other, but no memory was written: the simulator runs
// only the sample kernels (chain, spin) for real. On a GPU it never occurs.
var ErrNotComputed = fake.ErrNotComputed
