//go:build cgo && linux

package cuda

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"os"
	"sync"
	"unsafe"
)

// Library is the real driver, libcuda.so.1 loaded with dlopen.
type Library struct {
	version int
}

var (
	loadOnce sync.Once
	loaded   *Library
	loadErr  error
)

// Load opens libcuda.so.1 (or $FCSP_LIBCUDA), resolves the entry points and
// calls cuInit. It is safe to call many times; the library stays loaded for
// the life of the process, which is the one global the package keeps.
func Load() (*Library, error) {
	loadOnce.Do(func() {
		path := os.Getenv("FCSP_LIBCUDA")
		if path == "" {
			path = "libcuda.so.1"
		}
		cpath := C.CString(path)
		defer C.free(unsafe.Pointer(cpath))
		var buf [512]C.char
		rc := C.fcsp_load(cpath, &buf[0], C.int(len(buf)))
		switch {
		case rc == -1:
			loadErr = fmt.Errorf("%w: %s", ErrNoDriver, C.GoString(&buf[0]))
			return
		case rc != 0:
			loadErr = fmt.Errorf("%w: %w", ErrNoDriver, &Error{Op: "cuInit", Code: Result(rc)})
			return
		}
		var names [512]C.char
		if n := C.fcsp_missing_required(&names[0], C.int(len(names))); n != 0 {
			loadErr = fmt.Errorf("%w: %s lacks %s", ErrNotAvailable, path, C.GoString(&names[0]))
			return
		}
		l := &Library{}
		var v C.int
		if err := check("cuDriverGetVersion", Result(C.fcsp_cuDriverGetVersion(&v))); err != nil {
			loadErr = err
			return
		}
		l.version = int(v)
		loaded = l
	})
	return loaded, loadErr
}

func r(c C.CUresult) Result { return Result(c) }

func (l *Library) Name() string { return fmt.Sprintf("libcuda.so.1 (driver API %d)", l.version) }

func (l *Library) DriverVersion() (int, error) { return l.version, nil }

func (l *Library) DeviceName(d Device) (string, error) {
	var buf [256]C.char
	if err := check("cuDeviceGetName", r(C.fcsp_cuDeviceGetName(&buf[0], C.int(len(buf)), C.CUdevice(d)))); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

func (l *Library) DeviceUUID(d Device) ([16]byte, error) {
	var u [16]C.uchar
	err := check("cuDeviceGetUuid", r(C.fcsp_cuDeviceGetUuid(&u[0], C.CUdevice(d))))
	var out [16]byte
	for i := range u {
		out[i] = byte(u[i])
	}
	return out, err
}

// handle reinterprets a driver handle carried as an integer as the C pointer
// it is. Driver handles point into driver memory, never Go memory.
func handle[T ~uintptr](h T) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&h)) }

func cctx(c Context) C.CUcontext { return C.CUcontext(handle(c)) }

func (l *Library) MemcpyHtoD(c Context, dst DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return check("cuMemcpyHtoD_v2", r(C.fcsp_cuMemcpyHtoD(cctx(c), C.CUdeviceptr(dst), unsafe.Pointer(&src[0]), C.size_t(len(src)))))
}

func (l *Library) MemcpyDtoH(c Context, dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	return check("cuMemcpyDtoH_v2", r(C.fcsp_cuMemcpyDtoH(cctx(c), unsafe.Pointer(&dst[0]), C.CUdeviceptr(src), C.size_t(len(dst)))))
}

func cstream(s Stream) C.CUstream { return C.CUstream(handle(s)) }

func (l *Library) ModuleLoadData(c Context, image []byte) (Module, error) {
	// The image must be NUL-terminated text for PTX; copy into C memory so
	// the driver may read past what Go would let it.
	img := C.CBytes(append(append([]byte{}, image...), 0))
	defer C.free(img)
	var m C.CUmodule
	return Module(unsafe.Pointer(m)), check("cuModuleLoadData", r(C.fcsp_cuModuleLoadData(cctx(c), &m, img)))
}

func (l *Library) ModuleGetFunction(c Context, m Module, name string) (Function, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var f C.CUfunction
	return Function(unsafe.Pointer(f)), check("cuModuleGetFunction", r(C.fcsp_cuModuleGetFunction(cctx(c), &f, C.CUmodule(handle(m)), cname)))
}

func (l *Library) LaunchKernel(c Context, f Function, grid, block Dim3, shmem uint32, s Stream, args *Args) error {
	var buf *C.uchar
	var offs *C.uint32_t
	n := 0
	if args != nil && args.Len() > 0 {
		// Pointer-free Go memory, pinned for the call by cgo's rules; the
		// driver copies parameters before cuLaunchKernel returns.
		buf = (*C.uchar)(unsafe.Pointer(&args.buf[0]))
		offs = (*C.uint32_t)(unsafe.Pointer(&args.offs[0]))
		n = args.Len()
	}
	return check("cuLaunchKernel", r(C.fcsp_cuLaunchKernel(cctx(c), C.CUfunction(handle(f)),
		C.unsigned(grid.X), C.unsigned(grid.Y), C.unsigned(grid.Z),
		C.unsigned(block.X), C.unsigned(block.Y), C.unsigned(block.Z),
		C.unsigned(shmem), cstream(s), buf, offs, C.int(n))))
}

func cres(d *DevResource) *C.CUdevResource { return (*C.CUdevResource)(unsafe.Pointer(&d.Raw[0])) }

func (l *Library) DeviceGetDevResource(d Device, t ResourceType) (DevResource, error) {
	var res DevResource
	return res, check("cuDeviceGetDevResource", r(C.fcsp_cuDeviceGetDevResource(C.CUdevice(d), cres(&res), C.int(t))))
}

func (l *Library) DevSmResourceSplitByCount(input DevResource, flags, minCount uint32, maxGroups int) ([]DevResource, DevResource, int, error) {
	var rem DevResource
	in := (*C.CUdevResource)(C.malloc(C.size_t(ResourceSize)))
	defer C.free(unsafe.Pointer(in))
	*in = *cres(&input)
	if maxGroups <= 0 {
		var n C.unsigned
		err := check("cuDevSmResourceSplitByCount", r(C.fcsp_cuDevSmResourceSplitByCount(nil, &n, in, nil, C.unsigned(flags), C.unsigned(minCount))))
		return nil, rem, int(n), err
	}
	out := (*C.CUdevResource)(C.calloc(C.size_t(maxGroups), C.size_t(ResourceSize)))
	defer C.free(unsafe.Pointer(out))
	crem := (*C.CUdevResource)(C.calloc(1, C.size_t(ResourceSize)))
	defer C.free(unsafe.Pointer(crem))
	n := C.unsigned(maxGroups)
	if err := check("cuDevSmResourceSplitByCount", r(C.fcsp_cuDevSmResourceSplitByCount(out, &n, in, crem, C.unsigned(flags), C.unsigned(minCount)))); err != nil {
		return nil, rem, 0, err
	}
	groups := make([]DevResource, int(n))
	src := unsafe.Slice((*[ResourceSize]byte)(unsafe.Pointer(out)), maxGroups)
	for i := range groups {
		groups[i].Raw = src[i]
	}
	rem.Raw = *(*[ResourceSize]byte)(unsafe.Pointer(crem))
	return groups, rem, int(n), nil
}

func (l *Library) DevResourceGenerateDesc(res []DevResource) (ResourceDesc, error) {
	if len(res) == 0 {
		return 0, check("cuDevResourceGenerateDesc", ErrorInvalidValue)
	}
	// The resources may carry a next pointer on 13.1+; C memory keeps the
	// driver from ever seeing Go memory it could retain.
	arr := (*C.CUdevResource)(C.malloc(C.size_t(ResourceSize * len(res))))
	defer C.free(unsafe.Pointer(arr))
	dst := unsafe.Slice((*[ResourceSize]byte)(unsafe.Pointer(arr)), len(res))
	for i := range res {
		dst[i] = res[i].Raw
	}
	var d C.CUdevResourceDesc
	return ResourceDesc(unsafe.Pointer(d)), check("cuDevResourceGenerateDesc", r(C.fcsp_cuDevResourceGenerateDesc(&d, arr, C.unsigned(len(res)))))
}

func cgreen(g GreenCtx) C.CUgreenCtx { return C.CUgreenCtx(handle(g)) }

func (l *Library) GreenCtxGetDevResource(g GreenCtx, t ResourceType) (DevResource, error) {
	var res DevResource
	return res, check("cuGreenCtxGetDevResource", r(C.fcsp_cuGreenCtxGetDevResource(cgreen(g), cres(&res), C.int(t))))
}
