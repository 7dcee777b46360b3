// Which driver calls need a current context, and which handles cross green
// contexts: a probe for issue 29, run on the H200 (nvcc -o ctxneeds
// ctxneeds.cu -lcuda -lcublas -lpthread). Prints one TSV row per question:
// call, context current on the calling thread, result, time (us), notes.
#include <cuda.h>
#include <cublas_v2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *ptx =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry smid(.param .u64 out) {\n"
    " .reg .u32 %r<4>; .reg .u64 %rd<5>;\n"
    " ld.param.u64 %rd1, [out]; cvta.to.global.u64 %rd2, %rd1;\n"
    " mov.u32 %r1, %smid; mov.u32 %r2, %ctaid.x; mul.wide.u32 %rd3, %r2, 4;\n"
    " add.s64 %rd4, %rd2, %rd3; st.global.u32 [%rd4], %r1; ret; }\n"
    ".visible .entry spin(.param .u64 cycles) {\n"
    " .reg .u64 %rd<5>; .reg .pred %p;\n"
    " ld.param.u64 %rd1, [cycles]; mov.u64 %rd2, %clock64;\n"
    "L: mov.u64 %rd3, %clock64; sub.s64 %rd4, %rd3, %rd2; setp.lt.s64 %p, %rd4, %rd1; @%p bra L; ret; }\n";

static double now_us(void) {
  struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}
static const char *ename(CUresult r) { const char *s = 0; cuGetErrorName(r, &s); return s ? s : "?"; }
static void row(const char *call, const char *cur, CUresult r, double us, const char *note) {
  printf("%s\t%s\t%s\t%.1f\t%s\n", call, cur, ename(r), us, note ? note : "");
  fflush(stdout);
}
#define T(call, cur, expr, note) do { double _t = now_us(); CUresult _r = (expr); row(call, cur, _r, now_us() - _t, note); } while (0)
#define MUST(expr) do { CUresult _r = (expr); if (_r) { fprintf(stderr, "%s: %s\n", #expr, ename(_r)); exit(1); } } while (0)

static CUdevice dev; static CUcontext prim, ctxA, ctxB, ctxC;
static CUgreenCtx gA, gB, gC;
static CUstream sA, sB, sC;
static CUmodule modA, modP; static CUfunction smidA, smidP, spinP, spinC;
static int nsm;

// smids launches 4*nsm one-thread blocks of f on s and returns how many
// distinct SMs ran them (and the lowest and highest).
static CUresult smids(CUfunction f, CUstream s, CUdeviceptr buf, int *n, int *lo, int *hi) {
  int blocks = 4 * nsm; void *args[] = {&buf};
  CUresult r = cuLaunchKernel(f, blocks, 1, 1, 1, 1, 1, 0, s, args, 0);
  if (r) return r;
  if ((r = cuStreamSynchronize(s))) return r;
  unsigned h[2048]; CUcontext x; cuCtxPushCurrent(prim); r = cuMemcpyDtoH(h, buf, blocks * 4); cuCtxPopCurrent(&x);
  if (r) return r;
  char seen[1024] = {0}; *n = 0; *lo = 1 << 30; *hi = -1;
  for (int i = 0; i < blocks; i++) { if (!seen[h[i]]) { seen[h[i]] = 1; (*n)++; } if ((int)h[i] < *lo) *lo = h[i]; if ((int)h[i] > *hi) *hi = h[i]; }
  return CUDA_SUCCESS;
}

static void calls(const char *cur) {
  size_t fr, tot; CUstream s; CUevent e; CUdeviceptr p; CUmodule m; char note[128];
  T("cuMemGetInfo", cur, cuMemGetInfo(&fr, &tot), 0);
  CUresult r;
  { double t = now_us(); r = cuStreamCreate(&s, CU_STREAM_NON_BLOCKING); row("cuStreamCreate", cur, r, now_us() - t, 0); if (!r) cuStreamDestroy(s); }
  { double t = now_us(); r = cuGreenCtxStreamCreate(&s, gA, CU_STREAM_NON_BLOCKING, 0); row("cuGreenCtxStreamCreate(A)", cur, r, now_us() - t, 0);
    if (!r) { T("cuStreamDestroy(green A stream)", cur, cuStreamDestroy(s), 0); } }
  { double t = now_us(); r = cuEventCreate(&e, CU_EVENT_DISABLE_TIMING); row("cuEventCreate", cur, r, now_us() - t, 0);
    if (!r) { T("cuEventRecord(e, stream A)", cur, cuEventRecord(e, sA), "event made under this thread's context");
              T("cuStreamWaitEvent(stream B, e)", cur, cuStreamWaitEvent(sB, e, 0), 0);
              T("cuEventSynchronize", cur, cuEventSynchronize(e), 0);
              T("cuEventDestroy", cur, cuEventDestroy(e), 0); } }
  { double t = now_us(); r = cuMemAlloc(&p, 1 << 20); row("cuMemAlloc 1MiB", cur, r, now_us() - t, 0);
    if (!r) { char b[64] = {0};
      T("cuMemcpyHtoD", cur, cuMemcpyHtoD(p, b, 64), 0);
      T("cuMemcpyHtoDAsync(stream A)", cur, cuMemcpyHtoDAsync(p, b, 64, sA), 0);
      T("cuMemsetD32Async(stream A)", cur, cuMemsetD32Async(p, 0, 16, sA), 0);
      T("cuMemFree", cur, cuMemFree(p), 0); } }
  { double t = now_us(); r = cuModuleLoadData(&m, ptx); row("cuModuleLoadData", cur, r, now_us() - t, 0);
    if (!r) { CUfunction f; T("cuModuleGetFunction", cur, cuModuleGetFunction(&f, m, "smid"), 0);
      CUdeviceptr buf; if (!cuMemAllocAsync(&buf, 4096 * 4, sA) && !cuStreamSynchronize(sA)) {
        int n, lo, hi; r = smids(f, sA, buf, &n, &lo, &hi);
        snprintf(note, sizeof note, "module loaded here, launched on green stream A: %d SMs [%d..%d]", n, lo, hi);
        row("cuLaunchKernel(fn of this ctx, stream A)", cur, r, 0, note); cuMemFreeAsync(buf, sA); cuStreamSynchronize(sA); }
      T("cuModuleUnload", cur, cuModuleUnload(m), 0); } }
  { CUdeviceptr buf; double t = now_us(); r = cuMemAllocAsync(&buf, 1 << 20, sA); row("cuMemAllocAsync(stream A)", cur, r, now_us() - t, "device's default pool");
    if (!r) T("cuMemFreeAsync(stream A)", cur, cuMemFreeAsync(buf, sA), 0); }
  { CUmemPoolProps pp; memset(&pp, 0, sizeof pp); pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED; pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE; pp.location.id = dev;
    CUmemoryPool pool; double t = now_us(); r = cuMemPoolCreate(&pool, &pp); row("cuMemPoolCreate", cur, r, now_us() - t, 0);
    if (!r) { CUdeviceptr buf; t = now_us(); r = cuMemAllocFromPoolAsync(&buf, 1 << 20, pool, sA); row("cuMemAllocFromPoolAsync(stream A)", cur, r, now_us() - t, 0);
      if (!r) T("cuMemFreeAsync(pool block, stream A)", cur, cuMemFreeAsync(buf, sA), 0);
      cuStreamSynchronize(sA);
      T("cuMemPoolTrimTo", cur, cuMemPoolTrimTo(pool, 0), 0);
      T("cuMemPoolDestroy", cur, cuMemPoolDestroy(pool), 0); } }
  { CUdeviceptr buf; cuCtxPushCurrent(prim); cuMemAlloc(&buf, 4096 * 4); CUcontext x; cuCtxPopCurrent(&x);
    int n, lo, hi; r = smids(smidP, sA, buf, &n, &lo, &hi);
    snprintf(note, sizeof note, "module of the PRIMARY ctx on green stream A: %d SMs [%d..%d]", n, lo, hi);
    row("cuLaunchKernel(fn of primary, stream A)", cur, r, 0, note);
    r = smids(smidA, sA, buf, &n, &lo, &hi);
    snprintf(note, sizeof note, "module of green ctx A on green stream A: %d SMs [%d..%d]", n, lo, hi);
    row("cuLaunchKernel(fn of A, stream A)", cur, r, 0, note);
    r = smids(smidA, sB, buf, &n, &lo, &hi);
    snprintf(note, sizeof note, "module of green ctx A on green stream B: %d SMs [%d..%d]", n, lo, hi);
    row("cuLaunchKernel(fn of A, stream B)", cur, r, 0, note);
    cuCtxPushCurrent(prim); cuMemFree(buf); cuCtxPopCurrent(&x); }
  T("cuStreamSynchronize(stream A)", cur, cuStreamSynchronize(sA), 0);
  T("cuStreamQuery(stream A)", cur, cuStreamQuery(sA), 0);
}

// blocking: while spinC runs ~50 ms on green ctx C's stream, how long each
// call takes from a thread with the primary context current.
static void blocking(void) {
  unsigned long long cyc = 100000000ULL; // ~50 ms at ~2 GHz
  void *args[] = {&cyc};
  CUcontext x;
  const char *what[] = {"cuMemAlloc+cuMemFree 1MiB", "cuMemGetInfo", "cuStreamCreate+Destroy", "cuGreenCtxStreamCreate+Destroy", "cuEventCreate+Destroy", "cuMemAllocAsync+FreeAsync(stream A)", "cuModuleLoadData+Unload"};
  for (int w = 0; w < 7; w++) {
    MUST(cuLaunchKernel(spinC, 1, 1, 1, 1, 1, 1, 0, sC, args, 0));
    cuCtxPushCurrent(prim);
    double t = now_us(); CUresult r = CUDA_SUCCESS; CUdeviceptr p; size_t a, b; CUstream s; CUevent e; CUmodule m;
    switch (w) {
    case 0: r = cuMemAlloc(&p, 1 << 20); if (!r) r = cuMemFree(p); break;
    case 1: r = cuMemGetInfo(&a, &b); break;
    case 2: r = cuStreamCreate(&s, CU_STREAM_NON_BLOCKING); if (!r) r = cuStreamDestroy(s); break;
    case 3: r = cuGreenCtxStreamCreate(&s, gA, CU_STREAM_NON_BLOCKING, 0); if (!r) r = cuStreamDestroy(s); break;
    case 4: r = cuEventCreate(&e, 0); if (!r) r = cuEventDestroy(e); break;
    case 5: r = cuMemAllocAsync(&p, 1 << 20, sA); if (!r) r = cuMemFreeAsync(p, sA); break;
    case 6: r = cuModuleLoadData(&m, ptx); if (!r) r = cuModuleUnload(m); break;
    }
    double us = now_us() - t;
    cuCtxPopCurrent(&x);
    char note[96]; snprintf(note, sizeof note, "while a 50 ms kernel runs on another green ctx's stream");
    row(what[w], "primary, device busy", r, us, note);
    cuStreamSynchronize(sC);
  }
}

// cublas: handles made under one context, used under another.
static CUresult gemm(cublasHandle_t h, CUstream s, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, cublasStatus_t *st) {
  float one = 1, zero = 0;
  cublasSetStream(h, (cudaStream_t)s);
  *st = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 64, 4096, 4096, &one, (void *)a, CUDA_R_16BF, 64, (void *)b, CUDA_R_16BF, 4096, &zero, (void *)c, CUDA_R_16BF, 64, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  return cuStreamSynchronize(s);
}
static void cublas(void) {
  CUdeviceptr a, b, c; CUcontext x;
  cuCtxPushCurrent(prim); MUST(cuMemAlloc(&a, 64 * 4096 * 2)); MUST(cuMemAlloc(&b, 4096 * 4096 * 2)); MUST(cuMemAlloc(&c, 64 * 4096 * 2));
  cuMemsetD16(a, 0x3f80, 64 * 4096); cuMemsetD16(b, 0x3f80, 4096 * 4096); cuCtxSynchronize(); cuCtxPopCurrent(&x);
  struct { const char *made; CUcontext mk; const char *used; CUcontext use; CUstream s; const char *sn; } cases[] = {
      {"A", ctxA, "A", ctxA, sA, "A"}, {"A", ctxA, "B", ctxB, sA, "A"}, {"A", ctxA, "B", ctxB, sB, "B"},
      {"primary", prim, "A", ctxA, sA, "A"}, {"primary", prim, "primary", prim, sA, "A"}, {"A", ctxA, "none", 0, sA, "A"}};
  for (int i = 0; i < 6; i++) {
    cublasHandle_t h; cuCtxSetCurrent(cases[i].mk);
    cublasStatus_t cs = cublasCreate(&h), st = CUBLAS_STATUS_NOT_INITIALIZED;
    cuCtxSetCurrent(cases[i].use);
    CUresult r = cs ? CUDA_ERROR_UNKNOWN : gemm(h, cases[i].s, a, b, c, &st);
    char call[96], note[96];
    snprintf(call, sizeof call, "cublasGemmEx(handle made under %s, stream %s)", cases[i].made, cases[i].sn);
    snprintf(note, sizeof note, "create=%d gemm=%d", (int)cs, (int)st);
    row(call, cases[i].used, r, 0, note);
    cuCtxSetCurrent(cases[i].mk); if (!cs) cublasDestroy(h);
  }
  cuCtxSetCurrent(0);
  cuCtxPushCurrent(prim); cuMemFree(a); cuMemFree(b); cuMemFree(c); cuCtxPopCurrent(&x);
}

int main(void) {
  MUST(cuInit(0)); MUST(cuDeviceGet(&dev, 0)); MUST(cuDevicePrimaryCtxRetain(&prim, dev));
  CUdevResource all, grp[16], rest; unsigned n = 16;
  MUST(cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM));
  nsm = all.sm.smCount;
  MUST(cuDevSmResourceSplitByCount(grp, &n, &all, &rest, 0, 16));
  CUdevResourceDesc d0, dC;
  MUST(cuDevResourceGenerateDesc(&d0, &grp[0], 1));
  MUST(cuDevResourceGenerateDesc(&dC, &grp[1], n - 1));
  double t = now_us();
  MUST(cuGreenCtxCreate(&gA, d0, dev, CU_GREEN_CTX_DEFAULT_STREAM));
  double tcreate = now_us() - t;
  MUST(cuGreenCtxCreate(&gB, d0, dev, CU_GREEN_CTX_DEFAULT_STREAM));
  MUST(cuGreenCtxCreate(&gC, dC, dev, CU_GREEN_CTX_DEFAULT_STREAM));
  t = now_us(); MUST(cuCtxFromGreenCtx(&ctxA, gA)); double tfrom = now_us() - t;
  MUST(cuCtxFromGreenCtx(&ctxB, gB)); MUST(cuCtxFromGreenCtx(&ctxC, gC));
  t = now_us(); MUST(cuGreenCtxStreamCreate(&sA, gA, CU_STREAM_NON_BLOCKING, 0)); double tstream = now_us() - t;
  MUST(cuGreenCtxStreamCreate(&sB, gB, CU_STREAM_NON_BLOCKING, 0));
  MUST(cuGreenCtxStreamCreate(&sC, gC, CU_STREAM_NON_BLOCKING, 0));
  printf("# device SMs %d; group A = B = %d SMs, C = %d groups; cuGreenCtxCreate %.0f us, cuCtxFromGreenCtx %.1f us, cuGreenCtxStreamCreate %.1f us\n",
         nsm, grp[0].sm.smCount, n - 1, tcreate, tfrom, tstream);
  printf("# CUDA_DEVICE_MAX_CONNECTIONS=%s\n", getenv("CUDA_DEVICE_MAX_CONNECTIONS") ? getenv("CUDA_DEVICE_MAX_CONNECTIONS") : "(unset)");
  printf("call\tcurrent\tresult\tus\tnote\n");
  cuCtxSetCurrent(ctxA); MUST(cuModuleLoadData(&modA, ptx)); MUST(cuModuleGetFunction(&smidA, modA, "smid"));
  cuCtxSetCurrent(prim); MUST(cuModuleLoadData(&modP, ptx)); MUST(cuModuleGetFunction(&smidP, modP, "smid")); MUST(cuModuleGetFunction(&spinP, modP, "spin"));
  cuCtxSetCurrent(ctxC); CUmodule mc; MUST(cuModuleLoadData(&mc, ptx)); MUST(cuModuleGetFunction(&spinC, mc, "spin"));
  cuCtxSetCurrent(0); calls("none");
  cuCtxSetCurrent(prim); calls("primary");
  cuCtxSetCurrent(ctxB); calls("green B (same SMs as A)");
  cuCtxSetCurrent(ctxC); calls("green C (other SMs)");
  cuCtxSetCurrent(0);
  blocking();
  cublas();
  // Cost of the switch itself.
  t = now_us(); for (int i = 0; i < 10000; i++) { cuCtxSetCurrent(i & 1 ? ctxA : ctxB); } double tsw = (now_us() - t) / 10000;
  cuCtxSetCurrent(0);
  printf("# cuCtxSetCurrent between green contexts: %.3f us per call\n", tsw);
  // Slots: 8 more green contexts from the same descriptor.
  t = now_us(); CUgreenCtx more[8]; for (int i = 0; i < 8; i++) MUST(cuGreenCtxCreate(&more[i], d0, dev, CU_GREEN_CTX_DEFAULT_STREAM));
  printf("# 8 more green contexts over group A: %.0f us each\n", (now_us() - t) / 8);
  for (int i = 0; i < 8; i++) cuGreenCtxDestroy(more[i]);
  return 0;
}
