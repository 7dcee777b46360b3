// Package driverhook lets the module's test support give packages fcsp and
// greenctx a driver other than libcuda without their APIs naming the driver
// type: each sets its hook in an init function, package fcsptest calls it
// with the fake driver. Production code imports neither fcsptest nor the
// fake, so neither is linked into it.
package driverhook

import "github.com/fcsp-go/fcsp-go/internal/cuda"

// WithDriver returns an fcsp.Option (as any, since this package cannot
// import fcsp) that makes Open use a driver made by newDriver instead of
// loading libcuda; simulated marks the pool's DeviceInfo as simulated. It
// is set by package fcsp's init, so it is non-nil wherever fcsp is linked.
var WithDriver func(newDriver func() cuda.Driver, simulated bool) any

// OpenGreen opens a public greenctx.Device (as any, for the same reason)
// on drv; package greenctx sets it in an init function, package fcsptest
// calls it with the fake driver (fcsptest.GreenDevice).
var OpenGreen func(drv cuda.Driver, ordinal int) (any, error)
