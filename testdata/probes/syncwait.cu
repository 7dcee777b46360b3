// How a host thread should wait for a green stream's work when more threads
// wait than the host has cores: a probe for issue 29 (K=16 request
// goroutines per class), run on the H200:
//
//	nvcc -O2 -o syncwait syncwait.cu -lcuda -lpthread
//	./syncwait <ctxflags> <wait> <threads> <us>
//
// ctxflags: auto | spin | yield | blocking (the primary context's, set
// before it is retained) or gblocking (cuCtxSetFlags on the green context).
// wait: sync (cuStreamSynchronize), event (cuEventSynchronize on a
// CU_EVENT_BLOCKING_SYNC event), query (cuStreamQuery until done), hybrid
// (cuEventQuery for 20 us, then cuEventSynchronize on a blocking event).
// Each of <threads> threads has its own stream on one 16-SM green context
// and, for a second, launches a one-block kernel of <us> microseconds and
// waits for it. One TSV row: ctxflags, wait, threads, requests, P50, P99,
// max (us), host cores busy (rusage over wall time).
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static const char *ptx =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry spin(.param .u64 cycles) {\n"
    " .reg .u64 %rd<5>; .reg .pred %p;\n"
    " ld.param.u64 %rd1, [cycles]; mov.u64 %rd2, %clock64;\n"
    "L: mov.u64 %rd3, %clock64; sub.s64 %rd4, %rd3, %rd2; setp.lt.s64 %p, %rd4, %rd1; @%p bra L; ret; }\n";

#define MUST(expr) do { CUresult _r = (expr); if (_r) { const char *s = 0; cuGetErrorName(_r, &s); fprintf(stderr, "%s: %s\n", #expr, s); exit(1); } } while (0)

static double now_us(void) {
  struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static CUcontext gctx; static CUfunction spin; static const char *wait_mode;
static unsigned long long cycles; static double stop_at;
enum { MAXLAT = 200000 };
struct worker { pthread_t th; double *lat; int n; };

static void *run(void *arg) {
  struct worker *w = (struct worker *)arg;
  MUST(cuCtxSetCurrent(gctx));
  CUstream s; CUevent e;
  MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  MUST(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC));
  void *args[] = {&cycles};
  while (now_us() < stop_at && w->n < MAXLAT) {
    double t = now_us();
    MUST(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, args, 0));
    if (!strcmp(wait_mode, "sync")) {
      MUST(cuStreamSynchronize(s));
    } else if (!strcmp(wait_mode, "query")) {
      CUresult r; while ((r = cuStreamQuery(s)) == CUDA_ERROR_NOT_READY) {}
      MUST(r);
    } else {
      MUST(cuEventRecord(e, s));
      if (!strcmp(wait_mode, "hybrid")) {
        double until = now_us() + 20; CUresult r;
        while ((r = cuEventQuery(e)) == CUDA_ERROR_NOT_READY && now_us() < until) {}
        if (r == CUDA_ERROR_NOT_READY) MUST(cuEventSynchronize(e)); else MUST(r);
      } else {
        MUST(cuEventSynchronize(e));
      }
    }
    w->lat[w->n++] = now_us() - t;
  }
  cuEventDestroy(e); cuStreamDestroy(s);
  return 0;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc != 5) { fprintf(stderr, "usage: syncwait ctxflags wait threads us\n"); return 2; }
  const char *flags = argv[1]; wait_mode = argv[2]; int nt = atoi(argv[3]); double us = atof(argv[4]);
  MUST(cuInit(0)); CUdevice dev; MUST(cuDeviceGet(&dev, 0));
  unsigned f = CU_CTX_SCHED_AUTO;
  if (!strcmp(flags, "spin")) f = CU_CTX_SCHED_SPIN;
  if (!strcmp(flags, "yield")) f = CU_CTX_SCHED_YIELD;
  if (!strcmp(flags, "blocking")) f = CU_CTX_SCHED_BLOCKING_SYNC;
  MUST(cuDevicePrimaryCtxSetFlags(dev, f));
  CUcontext prim; MUST(cuDevicePrimaryCtxRetain(&prim, dev)); MUST(cuCtxSetCurrent(prim));
  int clk; MUST(cuDeviceGetAttribute(&clk, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, dev)); // kHz
  cycles = (unsigned long long)(us * clk / 1000.0);
  CUdevResource all, part[2], rest; unsigned n = 2;
  MUST(cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM));
  MUST(cuDevSmResourceSplitByCount(part, &n, &all, &rest, 0, 16));
  CUdevResourceDesc desc; MUST(cuDevResourceGenerateDesc(&desc, &part[0], 1));
  CUgreenCtx g; MUST(cuGreenCtxCreate(&g, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM));
  MUST(cuCtxFromGreenCtx(&gctx, g));
  MUST(cuCtxSetCurrent(gctx));
  if (!strcmp(flags, "gblocking")) MUST(cuCtxSetFlags(CU_CTX_SCHED_BLOCKING_SYNC));
  unsigned got; MUST(cuCtxGetFlags(&got));
  CUmodule m; MUST(cuModuleLoadData(&m, ptx)); MUST(cuModuleGetFunction(&spin, m, "spin"));
  struct worker *ws = (struct worker *)calloc(nt, sizeof *ws);
  struct rusage r0, r1; getrusage(RUSAGE_SELF, &r0);
  double t0 = now_us(); stop_at = t0 + 1e6;
  for (int i = 0; i < nt; i++) { ws[i].lat = (double *)malloc(sizeof(double) * MAXLAT); pthread_create(&ws[i].th, 0, run, &ws[i]); }
  int total = 0;
  for (int i = 0; i < nt; i++) { pthread_join(ws[i].th, 0); total += ws[i].n; }
  double wall = now_us() - t0; getrusage(RUSAGE_SELF, &r1);
  double cpu = (r1.ru_utime.tv_sec - r0.ru_utime.tv_sec + r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) * 1e6 +
               (r1.ru_utime.tv_usec - r0.ru_utime.tv_usec + r1.ru_stime.tv_usec - r0.ru_stime.tv_usec);
  double *all_lat = (double *)malloc(sizeof(double) * total); int k = 0;
  for (int i = 0; i < nt; i++) { memcpy(all_lat + k, ws[i].lat, sizeof(double) * ws[i].n); k += ws[i].n; }
  qsort(all_lat, total, sizeof(double), cmp);
  printf("%s\t%s\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.2f\tgreen ctx flags 0x%x\n", flags, wait_mode, nt, total,
         all_lat[total / 2], all_lat[(int)(total * 0.99)], all_lat[total - 1], cpu / wall, got);
  return 0;
}
