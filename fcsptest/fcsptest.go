// Package fcsptest runs package fcsp on a simulated GPU, as net/http/httptest
// runs servers without a network: an in-process fake driver that follows
// the real driver's rules (SM splits by granularity, alignment and the
// co-scheduling cap, replaying what an H200 measured; out-of-memory; error
// codes; stream-ordered pools), so tests and demos need no hardware.
//
//	pool, err := fcsp.Open(ctx, 0, fcsptest.SimulatedH200())
//
// Kernels launched on it do nothing unless the fake knows them; it knows
// package kernels' chain and spin, so results of the chain can be checked
// as on a GPU. Production code does not import this package, and so does
// not link the fake.
//
// GreenDevice opens a simulated device for package greenctx alone:
//
//	dev, err := fcsptest.GreenDevice(fcsptest.H200())
package fcsptest

import (
	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/greenctx"
	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/internal/driverhook"
)

// Device describes a simulated GPU.
type Device struct{ spec fake.Spec }

// H200 is the lent NVIDIA H200 as measured: 132 SMs in groups of 8,
// 143771 MiB.
func H200() Device { return Device{fake.H200()} }

// T4 is the Tesla T4 of the day-94 lesson: 40 SMs in groups of 2.
func T4() Device { return Device{fake.T4()} }

// WithMemory returns a copy of d with bytes of device memory.
func (d Device) WithMemory(bytes uint64) Device { d.spec.TotalMem = bytes; return d }

// Simulator is an fcsp.Option that opens the pool on a fresh simulated d
// instead of the GPU. Each Open gets its own device.
func Simulator(d Device) fcsp.Option {
	return driverhook.WithDriver(func() cuda.Driver {
		f := fake.New(d.spec)
		fake.RegisterKernels(f)
		return f
	}, true).(fcsp.Option)
}

// SimulatedH200 is Simulator(H200()).
func SimulatedH200() fcsp.Option { return Simulator(H200()) }

// GreenDevice opens device 0 of a fresh simulated d as a greenctx.Device,
// for code that uses partitions without package fcsp.
func GreenDevice(d Device) (*greenctx.Device, error) {
	f := fake.New(d.spec)
	fake.RegisterKernels(f)
	dev, err := driverhook.OpenGreen(f, 0)
	if err != nil {
		return nil, err
	}
	return dev.(*greenctx.Device), nil
}
