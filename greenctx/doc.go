// Package greenctx cuts a GPU's streaming multiprocessors into disjoint
// partitions, each a CUDA green context with a stream of its own, for code
// that wants partitions without the tenants, quotas and launch limits of
// package fcsp.
//
// The driver decides how finely a device can be cut. Device.Table shows
// what a cut at each minimum count would make (and what the driver made:
// the two agree), before anything is built. Device.Split performs one cut;
// the partitions taken from one Split are made of whole groups of that cut,
// so they never share an SM (the driver would build overlapping green
// contexts from two separate cuts).
//
//	dev, err := greenctx.Open(0)         // errors.Is(err, greenctx.ErrNoDriver) without a GPU
//	split, err := dev.Split(16)          // 8 groups of 16 SMs on the H200, 4 left over
//	fast, err := split.Take(32)          // two groups
//	rest, err := split.TakeRest()        // the other groups and the 4 left over
//
// Without a GPU, fcsptest.GreenDevice opens a simulated one.
//
// Partition.Context and Partition.Stream are the driver's CUcontext and
// CUstream, for another binding (cuBLAS, a cgo kernel launcher). The driver
// lets a green context be current on one OS thread at a time and does no
// locking of its own: code that makes it current must run on a locked OS
// thread (runtime.LockOSThread) and keep every other thread from making the
// same partition's context current until it is done. Calls that take the
// stream or context as an argument (cuLaunchKernel on the stream) need no
// current context. Package fcsp's Tenant.Do does all of this for you.
//
// Each of Device, Split and Partition is an io.Closer, and closing one
// closes what was made from it: Split.Close closes its partitions,
// Device.Close its splits. Close may race any other call: a call that loses
// the race returns ErrClosed.
package greenctx
