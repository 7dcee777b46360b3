//go:build cgo && linux

// Package cublas is the example's own run-time binding of the few cuBLAS
// entry points it uses, loaded with dlopen so that the example builds with
// no CUDA toolkit. cuBLAS binds a handle to the context current on the
// calling thread at cublasCreate: call Create, and every call on the
// handle, inside fcsp's Tenant.Do.
package cublas

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

typedef int (*p_create)(void **);
typedef int (*p_destroy)(void *);
typedef int (*p_setStream)(void *, void *);
typedef int (*p_setSm)(void *, int);
typedef int (*p_setWs)(void *, void *, size_t);
typedef int (*p_gemmEx)(void *, int, int, int, int, int, const void *, const void *, int, int,
                        const void *, int, int, const void *, void *, int, int, int, int);

static void *lib;
static p_create f_create;
static p_destroy f_destroy;
static p_setStream f_setStream;
static p_setSm f_setSm;
static p_setWs f_setWs;
static p_gemmEx f_gemmEx;

// cublas_probe opens path only to see that it loads, and closes it again.
static const char *cublas_probe(const char *path) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) return dlerror();
	dlclose(h);
	return NULL;
}

static const char *cublas_load(const char *path) {
	if (lib) return NULL;
	lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) return dlerror();
	f_create = (p_create)dlsym(lib, "cublasCreate_v2");
	f_destroy = (p_destroy)dlsym(lib, "cublasDestroy_v2");
	f_setStream = (p_setStream)dlsym(lib, "cublasSetStream_v2");
	f_setSm = (p_setSm)dlsym(lib, "cublasSetSmCountTarget");
	f_setWs = (p_setWs)dlsym(lib, "cublasSetWorkspace_v2");
	f_gemmEx = (p_gemmEx)dlsym(lib, "cublasGemmEx");
	if (!f_create || !f_destroy || !f_setStream || !f_setSm || !f_setWs || !f_gemmEx) {
		dlclose(lib);
		lib = NULL;
		return "a cuBLAS entry point is missing (cublasCreate_v2, cublasDestroy_v2, cublasSetStream_v2, cublasSetSmCountTarget, cublasSetWorkspace_v2, cublasGemmEx)";
	}
	return NULL;
}

static int cublas_create(void **h) { return f_create(h); }
static int cublas_destroy(void *h) { return f_destroy(h); }
static int cublas_set_stream(void *h, void *s) { return f_setStream(h, s); }
static int cublas_set_sm(void *h, int n) { return f_setSm(h, n); }
static int cublas_set_ws(void *h, void *p, size_t n) { return f_setWs(h, p, n); }

// C = alpha * A * B + beta * C, column-major, no transposes, bf16 in and
// out, fp32 compute, the default algorithm. Device addresses arrive as
// integers and become pointers here, on the C side.
static int cublas_gemm_bf16(void *h, int m, int n, int k, unsigned long long a, unsigned long long b,
                            unsigned long long c, float alpha, float beta) {
	return f_gemmEx(h, 0, 0, m, n, k, &alpha, (const void *)a, 14, m, (const void *)b, 14, k,
	                &beta, (void *)c, 14, m, 68, -1);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// Handle is a cublasHandle_t.
type Handle struct{ p unsafe.Pointer }

// Error is a failed cuBLAS call with its cublasStatus_t.
type Error struct {
	Op     string
	Status int
}

func (e *Error) Error() string { return fmt.Sprintf("%s: cublasStatus %d", e.Op, e.Status) }

func check(op string, st C.int) error {
	if st != 0 {
		return &Error{op, int(st)}
	}
	return nil
}

var (
	loadMu sync.Mutex
	loaded string // the path the process's cuBLAS came from; "": none yet
)

// Load opens libcublas at path, exactly as given. A process binds one
// cuBLAS: loading the same path again is a no-op, and a different path
// after a success is checked (a path that does not load fails as it would
// have) but refused rather than silently answered by the first library.
func Load(path string) error {
	loadMu.Lock()
	defer loadMu.Unlock()
	if loaded == path {
		return nil
	}
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	if loaded != "" {
		if e := C.cublas_probe(cp); e != nil {
			return fmt.Errorf("cublas: %s: %s", path, C.GoString(e))
		}
		return fmt.Errorf("cublas: %s: this process already bound cuBLAS from %s", path, loaded)
	}
	if e := C.cublas_load(cp); e != nil {
		return fmt.Errorf("cublas: %s: %s", path, C.GoString(e))
	}
	loaded = path
	return nil
}

// LoadDefault loads the first of paths that loads, for a caller that was
// given no path; it names every one tried when none does.
func LoadDefault(paths ...string) (string, error) {
	var errs []error
	for _, p := range paths {
		err := Load(p)
		if err == nil {
			return p, nil
		}
		errs = append(errs, err)
	}
	return "", errors.Join(errs...)
}

// Create makes a handle bound to the context current on this thread.
func Create() (Handle, error) {
	var h unsafe.Pointer
	err := check("cublasCreate_v2", C.cublas_create(&h))
	return Handle{h}, err
}

// Destroy frees the handle.
func (h Handle) Destroy() error { return check("cublasDestroy_v2", C.cublas_destroy(h.p)) }

// SetStream makes the handle queue its work on stream (a CUstream).
func (h Handle) SetStream(stream unsafe.Pointer) error {
	return check("cublasSetStream_v2", C.cublas_set_stream(h.p, stream))
}

// SetSmCountTarget tells cuBLAS how many SMs its kernels will have.
func (h Handle) SetSmCountTarget(n int) error {
	return check("cublasSetSmCountTarget", C.cublas_set_sm(h.p, C.int(n)))
}

// SetWorkspace gives cuBLAS n bytes of device memory at p for its scratch.
func (h Handle) SetWorkspace(p unsafe.Pointer, n uint64) error {
	return check("cublasSetWorkspace_v2", C.cublas_set_ws(h.p, p, C.size_t(n)))
}

// GemmBF16 queues C = alpha A B + beta C (column-major m x k times k x n,
// bf16 storage, fp32 compute) on the handle's stream.
func (h Handle) GemmBF16(m, n, k int, a, b, c uint64, alpha, beta float32) error {
	return check("cublasGemmEx", C.cublas_gemm_bf16(h.p, C.int(m), C.int(n), C.int(k),
		C.ulonglong(a), C.ulonglong(b), C.ulonglong(c), C.float(alpha), C.float(beta)))
}
