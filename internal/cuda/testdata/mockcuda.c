// A stand-in libcuda.so.1 for TestBindingAgainstMockDriver: each entry point
// appends one line to $MOCK_LOG saying what it was called with, so the test
// can see which symbol the binding resolved, what it pushed and popped, and
// what reached the driver. Built by the test with the system C compiler.
// With -DMISSING_REQUIRED it lacks three required entry points.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef void *H;
typedef unsigned long long CUdeviceptr;

// Read once, when the library is loaded: the benchmarks that run through
// this mock (fcsp's BenchmarkDoCgo) leave MOCK_LOG unset, and should time
// a cgo crossing, not getenv.
static const char *log_path;
__attribute__((constructor)) static void init_log(void) { log_path = getenv("MOCK_LOG"); }

static void logf_(const char *fmt, ...) {
	const char *path = log_path;
	if (!path) return;
	FILE *f = fopen(path, "a");
	if (!f) return;
	va_list ap;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	fclose(f);
}

#define BAD_CTX ((H)0xdead)
static __thread H current; // per thread, as the driver's

CUresult cuInit(unsigned flags) { logf_("cuInit %u", flags); return 0; }
CUresult cuDriverGetVersion(int *v) { *v = 13000; return 0; }
CUresult cuDeviceGetCount(int *n) { *n = 2; return 0; }
CUresult cuDeviceGet(int *d, int o) { logf_("cuDeviceGet %d", o); *d = o + 100; return 0; }
CUresult cuDeviceGetName(char *name, int len, int d) { snprintf(name, len, "Mock H200 #%d", d); return 0; }
// Only the unversioned UUID: the binding falls back to it.
CUresult cuDeviceGetUuid(unsigned char *u, int d) { logf_("cuDeviceGetUuid %d", d); for (int i = 0; i < 16; i++) u[i] = i; return 0; }
CUresult cuDeviceGetAttribute(int *v, int a, int d) { logf_("cuDeviceGetAttribute a=%d d=%d", a, d); *v = a * 10 + d; return 0; }
// Legacy and versioned: the binding must take _v2.
CUresult cuDeviceTotalMem(unsigned *b, int d) { logf_("LEGACY cuDeviceTotalMem"); *b = 1; return 0; }
CUresult cuDeviceTotalMem_v2(size_t *b, int d) { logf_("cuDeviceTotalMem_v2 %d", d); *b = (size_t)141 << 30; return 0; }
CUresult cuDevicePrimaryCtxRetain(H *c, int d) { *c = (H)0x1000; return 0; }
CUresult cuDevicePrimaryCtxRelease_v2(int d) { logf_("cuDevicePrimaryCtxRelease_v2 %d", d); return 0; }
CUresult cuDevicePrimaryCtxReset_v2(int d) { logf_("cuDevicePrimaryCtxReset_v2 %d", d); return 0; } /* entry points added for fault */
CUresult cuCtxCreate_v4(H *c, void *p, unsigned f, int d) { logf_("cuCtxCreate_v4 params=%p flags=%u d=%d", p, f, d); *c = (H)0x2000; current = *c; return 0; }
CUresult cuCtxCreate_v2(H *c, unsigned f, int d) { logf_("cuCtxCreate_v2"); *c = (H)0x2000; current = *c; return 0; }
CUresult cuCtxDestroy_v2(H c) { logf_("cuCtxDestroy_v2 %p", c); return 0; }
CUresult cuCtxPushCurrent_v2(H c) {
	if (c == BAD_CTX) { logf_("push %p refused", c); return 201; }
	logf_("push %p", c); current = c; return 0;
}
CUresult cuCtxPopCurrent_v2(H *c) { logf_("pop"); *c = current; current = 0; return 0; }
CUresult cuCtxSynchronize(void) { logf_("cuCtxSynchronize in %p", current); return 0; }
CUresult cuMemAlloc(unsigned *p, unsigned n) { logf_("LEGACY cuMemAlloc"); return 0; }
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) { logf_("cuMemAlloc_v2 %zu in %p", n, current); *p = 0xabc000; return 0; }
#ifndef MISSING_REQUIRED
CUresult cuMemFree_v2(CUdeviceptr p) { logf_("cuMemFree_v2 %#llx in %p", p, current); return p == 0xbad ? 1 : 0; }
#endif
CUresult cuMemGetInfo_v2(size_t *f, size_t *t) { *f = 10; *t = 20; return 0; }
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { logf_("cuMemcpyHtoD_v2 %#llx %.*s in %p", d, (int)n, (const char *)s, current); return 0; }
CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) { memset(d, 'x', n); logf_("cuMemcpyDtoH_v2 %#llx %zu in %p", s, n, current); return 0; }
#ifndef MISSING_REQUIRED
CUresult cuStreamCreate(H *s, unsigned f) { logf_("cuStreamCreate flags=%u in %p", f, current); *s = (H)0x3000; return 0; }
#endif
CUresult cuStreamDestroy_v2(H s) { logf_("cuStreamDestroy_v2 %p in %p", s, current); return 0; }
CUresult cuStreamSynchronize(H s) { logf_("cuStreamSynchronize %p in %p", s, current); return 0; }
CUresult cuEventCreate(H *e, unsigned f) { *e = (H)0x4000; return 0; }
CUresult cuEventRecord(H e, H s) { logf_("cuEventRecord %p %p in %p", e, s, current); return 0; }
CUresult cuEventSynchronize(H e) { logf_("cuEventSynchronize %p in %p", e, current); return 0; }
CUresult cuEventElapsedTime_v2(float *ms, H a, H b) { logf_("cuEventElapsedTime_v2 %p %p", a, b); *ms = 1.5f; return 0; }
CUresult cuEventDestroy_v2(H e) { return 0; }
CUresult cuModuleLoadData(H *m, const void *img) { logf_("cuModuleLoadData %s in %p", (const char *)img, current); *m = (H)0x5000; return 0; }
CUresult cuModuleUnload(H m) { return 0; }
CUresult cuModuleGetFunction(H *f, H m, const char *name) { logf_("cuModuleGetFunction %p %s in %p", m, name, current); *f = (H)0x6000; return 0; }
#ifndef MISSING_REQUIRED
CUresult cuLaunchKernel(H f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shmem, H s, void **params, void **extra) {
	if (!params) {
		logf_("cuLaunchKernel %p grid=%u,%u,%u block=%u,%u,%u shmem=%u s=%p params=NULL in %p", f, gx, gy, gz, bx, by, bz, shmem, s, current);
		return 0;
	}
	logf_("cuLaunchKernel %p grid=%u,%u,%u block=%u,%u,%u shmem=%u s=%p args=%d,%#llx extra=%p in %p", f, gx, gy, gz, bx, by, bz,
	      shmem, s, *(int *)params[0], *(unsigned long long *)params[1], (void *)extra, current);
	return 0;
}
#endif
typedef struct { unsigned char b[144]; } R;
CUresult cuDeviceGetDevResource(int d, R *r, int t) { memset(r, 0, sizeof *r); r->b[0] = (unsigned char)t; r->b[96] = 132; r->b[143] = 0x7e; return 0; }
CUresult cuDevSmResourceSplitByCount(R *res, unsigned *n, const R *in, R *rem, unsigned fl, unsigned mc) {
	logf_("cuDevSmResourceSplitByCount res=%s n=%u in.sm=%u in.last=%#x rem=%s flags=%u min=%u", res ? "set" : "NULL", *n,
	      in->b[96], in->b[143], rem ? "set" : "NULL", fl, mc);
	unsigned groups = in->b[96] / mc;
	if (!res) { *n = groups; return 0; }
	if (groups > *n) groups = *n;
	for (unsigned i = 0; i < groups; i++) { memset(&res[i], 0, sizeof(R)); res[i].b[96] = mc; res[i].b[143] = i; }
	*n = groups;
	memset(rem, 0, sizeof *rem);
	rem->b[96] = in->b[96] - groups * mc;
	return 0;
}
CUresult cuDevResourceGenerateDesc(H *d, R *r, unsigned n) { logf_("cuDevResourceGenerateDesc n=%u last=%#x,%#x", n, r[0].b[143], r[n - 1].b[143]); *d = (H)0x7000; return 0; }
CUresult cuGreenCtxCreate(H *g, H d, int dev, unsigned f) { logf_("cuGreenCtxCreate %p %d %u", d, dev, f); *g = (H)0x8000; return 0; }
// No cuGreenCtxDestroy: an optional entry point this driver lacks.
CUresult cuMemPoolCreate(H *p, const void *props) {
	const int *pr = props;
	logf_("cuMemPoolCreate alloc=%d handles=%d loc=%d,%d maxSize=%zu in %p", pr[0], pr[1], pr[2], pr[3],
	      *(const size_t *)((const char *)props + 24), current);
	*p = (H)0x9000; return 0;
}
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *d, size_t n, H p, H s) { logf_("cuMemAllocFromPoolAsync %zu %p %p in %p", n, p, s, current); *d = 0xdef000; return 0; }
CUresult cuMemFreeAsync(CUdeviceptr d, H s) { logf_("cuMemFreeAsync %#llx %p in %p", d, s, current); return 0; }
CUresult cuMemPoolSetAttribute(H p, int a, void *v) { logf_("cuMemPoolSetAttribute %p a=%d v=%llu in %p", p, a, *(unsigned long long *)v, current); return 0; }
CUresult cuMemPoolGetAttribute(H p, int a, void *v) { *(unsigned long long *)v = 77; return 0; }
// entry points added for dofast: the calling thread's current context.
CUresult cuCtxGetCurrent(H *c) { logf_("cuCtxGetCurrent"); *c = current; return 0; }
CUresult cuCtxSetCurrent(H c) {
	if (c == BAD_CTX) { logf_("cuCtxSetCurrent %p refused", c); return 201; }
	logf_("cuCtxSetCurrent %p", c); current = c; return 0;
}
