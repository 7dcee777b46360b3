package smpart

import (
	"fmt"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// Facts is what the driver says of the device besides its SM resource.
type Facts struct {
	Name              string
	UUID              string // GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, as nvidia-smi prints it
	ComputeCapability string // e.g. "90"
	ThreadsPerSM      int    // resident threads per SM
	TotalMemory       uint64 // bytes
	Driver            string // which binding: libcuda.so.1 or the fake
}

// Facts asks the driver for the device's name, UUID, compute capability,
// threads per SM and memory.
func (d *Device) Facts() (Facts, error) {
	drv, dev := d.drv, d.dev
	f := Facts{Driver: drv.Name()}
	var err error
	if f.Name, err = drv.DeviceName(dev); err != nil {
		return f, err
	}
	u, err := drv.DeviceUUID(dev)
	if err != nil {
		return f, err
	}
	f.UUID = fmt.Sprintf("GPU-%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
	major, err := drv.DeviceAttribute(dev, cuda.AttrComputeCapabilityMajor)
	if err != nil {
		return f, err
	}
	minor, err := drv.DeviceAttribute(dev, cuda.AttrComputeCapabilityMinor)
	if err != nil {
		return f, err
	}
	f.ComputeCapability = fmt.Sprintf("%d%d", major, minor)
	if f.ThreadsPerSM, err = drv.DeviceAttribute(dev, cuda.AttrMaxThreadsPerSM); err != nil {
		return f, err
	}
	f.TotalMemory, err = drv.DeviceTotalMem(dev)
	return f, err
}

// LoadModule loads image with ctx. Loaded with the primary context, a
// module serves every green stream of the device, on that stream's SMs
// (docs/CONTEXTS.md), so a tenant's layouts can share it.
func (d *Device) LoadModule(ctx cuda.Context, image []byte) (cuda.Module, error) {
	return d.drv.ModuleLoadData(ctx, image)
}

// Function looks the kernel called name up in m.
func (d *Device) Function(ctx cuda.Context, m cuda.Module, name string) (cuda.Function, error) {
	return d.drv.ModuleGetFunction(ctx, m, name)
}

// UnloadModule unloads m.
func (d *Device) UnloadModule(ctx cuda.Context, m cuda.Module) error {
	return d.drv.ModuleUnload(ctx, m)
}

// SwapCurrent makes cur current on the calling OS thread, which the caller
// has locked, and returns the context current before and the thread's id;
// RestoreCurrent puts prev back.
func (d *Device) SwapCurrent(cur cuda.Context) (prev cuda.Context, thread int, err error) {
	return d.drv.CtxSwapCurrent(cur)
}

// RestoreCurrent makes prev current again on the calling thread where
// SwapCurrent replaced it by cur. Where the driver refuses, the thread is
// left with no context current rather than with cur, which may be
// destroyed while the thread lives on.
func (d *Device) RestoreCurrent(prev, cur cuda.Context) error {
	if prev == cur {
		return nil
	}
	return RestoreCurrent(d.drv, prev)
}

// RestoreCurrent makes prev current on the calling thread with drv, or
// none where the driver refuses it (a lost device may): never leaves the
// thread's context as it was. Tenant.Do passes the driver under the fault
// guard: putting a thread's context back is no device work, and a lost
// pool must not leave its green context current.
func RestoreCurrent(drv cuda.Driver, prev cuda.Context) error {
	err := drv.CtxSetCurrent(prev)
	if err != nil {
		_ = drv.CtxSetCurrent(0)
	}
	return err
}

// QueryStream is cuStreamQuery with ctx (0 where the driver takes none): nil
// once the work queued on s has run, cuda.ErrorNotReady before; it never
// waits.
func (d *Device) QueryStream(ctx cuda.Context, s cuda.Stream) error { return d.drv.StreamQuery(ctx, s) }
