// A growth that does not wait for the drain: how soon a latency class's
// kernels reach the SMs it grows onto while the batch class's work queued
// before the growth still runs there, with and without stream priority
// across green contexts (issue 56: a growth waits today for the batch's
// work queued on the SMs it takes; without preemption the floor is what
// already runs there, and priority may decide who gets each SM as the
// batch's blocks leave it). Built and run on the GPU machine:
//
//	nvcc -O2 -arch=sm_90 -o growprio testdata/probes/growprio.cu -lcuda -lcublas
//	CUDA_DEVICE_MAX_CONNECTIONS=32 ./growprio [reps]
//
// (as many hardware work queues as the SDK asks for: streams sharing one
// would queue the class behind the batch whatever the SMs). It stops
// before measuring where its %smid map of a context disagrees with the
// SMs the driver says it holds.
//
// Green contexts over groups of 8 SMs: L (the class at its floor, 2 groups),
// T (the 4 groups it grows onto), Lb = L+T (the class grown), Bb = T+A (the
// batch before the growth), where A is every other group. The batch queues
// Q kernels on Bb, and 200 us later the class queues P probe kernels (96
// blocks of 1024 threads, 100 us each: one wave on 48 SMs, three on 16):
//
//	alone16, alone48  no batch: the class on L, on Lb
//	serve16           on L while the batch runs (today, during the drain)
//	drain48           on Lb after the batch's queue (today's growth: the
//	                  class's stream waits for the batch's last event)
//	nodrain           on Lb at once, both streams at the default priority
//	nodrain-hi        on Lb at once, the class's stream at the greatest
//	prim, prim-hi     the control: batch and class both on the primary
//	                  context (every SM), default and greatest priority
//
// Batches: blocks50 (blocks of 50 us, 20 waves, about 1 ms a kernel),
// blocks1500 (one wave of 1.5 ms blocks, as a persistent kernel holds its
// SMs), gemm (cuBLAS bf16 8192^3). One TSV row per repetition: batch, mode,
// rep, first (us from the class's first launch to its first probe done, as
// the GPU's events see it), all (to its last probe done), batch (us from
// the batch's first kernel to its last done), ont (blocks that ran on T, of
// P*96), ont1 (of the first probe's 96); then a summary per batch and mode
// (# lines: medians and P90s).
#include <cuda.h>
#include <cublas_v2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *ptx =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry spin(.param .u64 ns) {\n"
    " .reg .u64 %rd<5>; .reg .pred %p;\n"
    " ld.param.u64 %rd1, [ns]; mov.u64 %rd2, %globaltimer;\n"
    "S1: mov.u64 %rd3, %globaltimer; sub.s64 %rd4, %rd3, %rd2; setp.lt.s64 %p, %rd4, %rd1; @%p bra S1; ret; }\n"
    ".visible .entry probe(.param .u64 out, .param .u64 ns) {\n"
    " .reg .u32 %r<4>; .reg .u64 %rd<10>; .reg .pred %p<3>;\n"
    " ld.param.u64 %rd1, [out]; cvta.to.global.u64 %rd1, %rd1; ld.param.u64 %rd2, [ns];\n"
    " mov.u64 %rd3, %globaltimer;\n"
    "P1: mov.u64 %rd4, %globaltimer; sub.s64 %rd5, %rd4, %rd3; setp.lt.s64 %p1, %rd5, %rd2; @%p1 bra P1;\n"
    " mov.u32 %r1, %tid.x; setp.ne.u32 %p2, %r1, 0; @%p2 bra P2;\n"
    " mov.u32 %r2, %smid; mov.u32 %r3, %ctaid.x;\n"
    " mul.wide.u32 %rd6, %r3, 24; add.s64 %rd7, %rd1, %rd6; cvt.u64.u32 %rd8, %r2;\n"
    " st.global.u64 [%rd7], %rd8; st.global.u64 [%rd7+8], %rd3; st.global.u64 [%rd7+16], %rd4;\n"
    "P2: ret; }\n";

static const char *ename(CUresult r) { const char *s = 0; cuGetErrorName(r, &s); return s ? s : "?"; }
#define MUST(expr) do { CUresult _r = (expr); if (_r) { fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, ename(_r)); exit(1); } } while (0)
#define MUSTB(expr) do { cublasStatus_t _s = (expr); if (_s) { fprintf(stderr, "%s:%d %s: cublas %d\n", __FILE__, __LINE__, #expr, (int)_s); exit(1); } } while (0)

enum { BLOCKS = 96, THREADS = 1024, P = 20, MAXSM = 1024 };
static const unsigned long long probeNs = 100000;

typedef struct {
  CUgreenCtx g;
  CUcontext c;
  int sms;
  char on[MAXSM];
} green;

static CUdevice dev;
static CUcontext prim;
static CUfunction fspin, fprobe;
static CUdeviceptr rec;  // P*BLOCKS records of 3 u64: smid, start, end (globaltimer ns)
static unsigned long long host[P * BLOCKS * 3];

static void sleep_us(long us) {
  struct timespec t = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&t, 0);
}

// launch_blocks launches the probe kernel's blocks at record i on s.
static void launch_blocks(CUstream s, int i, int blocks, unsigned long long ns) {
  CUdeviceptr out = rec + (CUdeviceptr)i * 24;
  void *args[] = {&out, &ns};
  MUST(cuLaunchKernel(fprobe, blocks, 1, 1, THREADS, 1, 1, 0, s, args, 0));
}

// launch_probe launches the class's probe i (of P) on s.
static void launch_probe(CUstream s, int i) { launch_blocks(s, i * BLOCKS, BLOCKS, probeNs); }

static void launch_spin(CUstream s, int blocks, unsigned long long ns) {
  void *args[] = {&ns};
  MUST(cuLaunchKernel(fspin, blocks, 1, 1, THREADS, 1, 1, 0, s, args, 0));
}

// mapSMs marks the SMs g's blocks run on (P*BLOCKS short blocks, many
// to an SM, four times) and returns how many; g->sms is what the driver
// says g holds.
static int mapSMs(green *g) {
  CUstream s;
  CUdevResource r;
  MUST(cuGreenCtxGetDevResource(g->g, &r, CU_DEV_RESOURCE_TYPE_SM));
  g->sms = (int)r.sm.smCount;
  MUST(cuGreenCtxStreamCreate(&s, g->g, CU_STREAM_NON_BLOCKING, 0));
  memset(g->on, 0, sizeof g->on);
  int seen = 0;
  for (int k = 0; k < 4; k++) {
    launch_blocks(s, 0, P * BLOCKS, 20000);
    MUST(cuStreamSynchronize(s));
    MUST(cuMemcpyDtoH(host, rec, sizeof host));
    for (int b = 0; b < P * BLOCKS; b++) {
      int sm = (int)host[b * 3];
      if (sm >= 0 && sm < MAXSM && !g->on[sm]) g->on[sm] = 1, seen++;
    }
  }
  MUST(cuStreamDestroy(s));
  return seen;
}

static void make(green *g, CUdevResource *r, unsigned n) {
  CUdevResourceDesc d;
  MUST(cuDevResourceGenerateDesc(&d, r, n));
  MUST(cuGreenCtxCreate(&g->g, d, dev, CU_GREEN_CTX_DEFAULT_STREAM));
  MUST(cuCtxFromGreenCtx(&g->c, g->g));
}

// The batch: what it queues and where.
typedef struct {
  const char *name;
  int q;                      // kernels queued
  int waves;                  // spin: waves of two blocks per SM (0: gemm)
  unsigned long long ns;      // spin: each block's time
} batchKind;

static const batchKind kinds[] = {
    {"blocks50", 3, 20, 50000},
    {"blocks1500", 2, 1, 1500000},
    {"gemm", 3, 0, 0},
};

static CUdeviceptr ga, gb, gc;
enum { GN = 8192 };

static void gemm(cublasHandle_t h, CUstream s) {
  float one = 1, zero = 0;
  MUSTB(cublasSetStream(h, (cudaStream_t)s));
  MUSTB(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, GN, GN, GN, &one, (void *)ga, CUDA_R_16BF, GN, (void *)gb, CUDA_R_16BF, GN,
                     &zero, (void *)gc, CUDA_R_16BF, GN, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// queueBatch queues k's kernels on s; a gemm with ctx current, where its
// handle was made (prim current again after).
static void queueBatch(const batchKind *k, CUstream s, cublasHandle_t h, CUcontext ctx, int sms) {
  for (int i = 0; i < k->q; i++) {
    if (k->waves) {
      launch_spin(s, 2 * sms * k->waves, k->ns);
      continue;
    }
    MUST(cuCtxSetCurrent(ctx));
    gemm(h, s);
    MUST(cuCtxSetCurrent(prim));
  }
}

static int cmpd(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double pct(double *v, int n, double p) {
  double *c = (double *)malloc(n * sizeof *c);
  memcpy(c, v, n * sizeof *c);
  qsort(c, n, sizeof *c, cmpd);
  int i = (int)(p * (n - 1) + 0.5);
  double r = c[i];
  free(c);
  return r;
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 15;
  if (reps < 1) reps = 1;
  MUST(cuInit(0));
  MUST(cuDeviceGet(&dev, 0));
  MUST(cuDevicePrimaryCtxRetain(&prim, dev));
  MUST(cuCtxSetCurrent(prim));
  char name[256] = {0};
  MUST(cuDeviceGetName(name, sizeof name, dev));
  int drvv = 0;
  MUST(cuDriverGetVersion(&drvv));
  CUdevResource all, grp[64], rem;
  unsigned n = 64;
  MUST(cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM));
  MUST(cuDevSmResourceSplitByCount(grp, &n, &all, &rem, 0, 8));
  if (n < 8) {
    fprintf(stderr, "only %u groups of 8 SMs\n", n);
    return 1;
  }
  CUmodule mod;
  MUST(cuModuleLoadData(&mod, ptx));
  MUST(cuModuleGetFunction(&fspin, mod, "spin"));
  MUST(cuModuleGetFunction(&fprobe, mod, "probe"));
  MUST(cuMemAlloc(&rec, (size_t)P * BLOCKS * 24));
  size_t gbytes = (size_t)GN * GN * 2;
  MUST(cuMemAlloc(&ga, gbytes));
  MUST(cuMemAlloc(&gb, gbytes));
  MUST(cuMemAlloc(&gc, gbytes));
  MUST(cuMemsetD16(ga, 0x3f80, (size_t)GN * GN));
  MUST(cuMemsetD16(gb, 0x3f80, (size_t)GN * GN));
  MUST(cuCtxSynchronize());

  green L, Lb, Bb;
  make(&L, &grp[0], 2);
  make(&Lb, &grp[0], 6);
  make(&Bb, &grp[2], n - 2);
  int seenL = mapSMs(&L), seenLb = mapSMs(&Lb), seenBb = mapSMs(&Bb);
  char T[MAXSM] = {0};
  int nt = 0, bad = 0;
  for (int i = 0; i < MAXSM; i++) {
    if (Lb.on[i] && !L.on[i]) T[i] = 1, nt++;
    if (L.on[i] && Bb.on[i]) bad++;
    if (T[i] && !Bb.on[i]) bad++;
  }
  int least = 0, greatest = 0;
  MUST(cuCtxGetStreamPriorityRange(&least, &greatest));
  const char *conns = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  printf("# %s, driver %d; %u groups of %u SMs; L %d SMs (%d seen), Lb %d (%d), T %d seen, Bb %d (%d); "
         "%d SMs where the sets disagree; stream priorities %d (least) to %d (greatest); CUDA_DEVICE_MAX_CONNECTIONS=%s; "
         "%d reps, P=%d probes of %d blocks x %llu us\n",
         name, drvv, n, grp[0].sm.smCount, L.sms, seenL, Lb.sms, seenLb, nt, Bb.sms, seenBb, bad, least, greatest,
         conns ? conns : "(unset)", reps, P, BLOCKS, probeNs / 1000);
  // A map that missed SMs would count the class's blocks on T wrongly and
  // size the batch wrongly: the run is worth nothing, so it stops here.
  if (bad || seenL != L.sms || seenLb != Lb.sms || seenBb != Bb.sms || nt != Lb.sms - L.sms) {
    fprintf(stderr, "the SM map disagrees with the driver's counts (see the first line)\n");
    return 1;
  }

  CUstream sL, sLb0, sLbHi, sB, sP0, sPhi, sPb;
  MUST(cuGreenCtxStreamCreate(&sL, L.g, CU_STREAM_NON_BLOCKING, 0));
  MUST(cuGreenCtxStreamCreate(&sLb0, Lb.g, CU_STREAM_NON_BLOCKING, 0));
  MUST(cuGreenCtxStreamCreate(&sLbHi, Lb.g, CU_STREAM_NON_BLOCKING, greatest));
  MUST(cuGreenCtxStreamCreate(&sB, Bb.g, CU_STREAM_NON_BLOCKING, least));
  MUST(cuStreamCreateWithPriority(&sP0, CU_STREAM_NON_BLOCKING, least));
  MUST(cuStreamCreateWithPriority(&sPhi, CU_STREAM_NON_BLOCKING, greatest));
  MUST(cuStreamCreateWithPriority(&sPb, CU_STREAM_NON_BLOCKING, least));

  cublasHandle_t hB, hP;
  MUST(cuCtxSetCurrent(Bb.c));
  MUSTB(cublasCreate(&hB));
  MUSTB(cublasSetSmCountTarget(hB, Bb.sms));
  MUST(cuCtxSetCurrent(prim));
  MUSTB(cublasCreate(&hP));

  CUevent e0, e1, eP, b0, b1;
  MUST(cuEventCreate(&e0, CU_EVENT_DEFAULT));
  MUST(cuEventCreate(&e1, CU_EVENT_DEFAULT));
  MUST(cuEventCreate(&eP, CU_EVENT_DEFAULT));
  MUST(cuEventCreate(&b0, CU_EVENT_DEFAULT));
  MUST(cuEventCreate(&b1, CU_EVENT_DEFAULT));

  struct mode {
    const char *name;
    CUstream *probe;     // the class's stream
    CUstream *batch;     // 0: no batch
    cublasHandle_t *h;
    CUcontext *hctx;     // where h was made
    int batchSMs;        // 1: the spin batch is sized for every SM, else for Bb's
    int drain;           // the class's stream waits for the batch's last event
  } modes[] = {
      {"alone16", &sL, 0, 0, 0, 0, 0},
      {"alone48", &sLb0, 0, 0, 0, 0, 0},
      {"serve16", &sL, &sB, &hB, &Bb.c, 0, 0},
      {"drain48", &sLb0, &sB, &hB, &Bb.c, 0, 1},
      {"nodrain", &sLb0, &sB, &hB, &Bb.c, 0, 0},
      {"nodrain-hi", &sLbHi, &sB, &hB, &Bb.c, 0, 0},
      {"prim", &sP0, &sPb, &hP, &prim, 1, 0},
      {"prim-hi", &sPhi, &sPb, &hP, &prim, 1, 0},
  };
  enum { NM = sizeof modes / sizeof modes[0], NK = sizeof kinds / sizeof kinds[0] };
  int nsm = all.sm.smCount;
  size_t cells = (size_t)NK * NM * reps;
  double *first = (double *)calloc(cells, sizeof(double)), *allp = (double *)calloc(cells, sizeof(double)),
         *bat = (double *)calloc(cells, sizeof(double)), *ont = (double *)calloc(cells, sizeof(double)),
         *ont1 = (double *)calloc(cells, sizeof(double));
  printf("batch\tmode\trep\tfirst_us\tall_us\tbatch_us\tont\tont1\n");
  // Warm every path once (cuBLAS picks its kernel on first use).
  for (int k = 0; k < (int)NK; k++) {
    queueBatch(&kinds[k], sB, hB, Bb.c, Bb.sms);
    queueBatch(&kinds[k], sPb, hP, prim, nsm);
  }
  CUstream warm[] = {sL, sLb0, sLbHi, sP0, sPhi};
  for (CUstream s : warm) launch_probe(s, 0);
  for (CUstream s : warm) MUST(cuStreamSynchronize(s));
  MUST(cuStreamSynchronize(sB));
  MUST(cuStreamSynchronize(sPb));
  for (int r = 0; r < reps; r++) {
    for (int k = 0; k < (int)NK; k++) {
      for (int m = 0; m < (int)NM; m++) {  // modes interleaved within a rep: drift hits them alike
        struct mode *md = &modes[m];
        int idx = (k * NM + m) * reps + r;
        if (md->batch) {
          MUST(cuEventRecord(b0, *md->batch));
          queueBatch(&kinds[k], *md->batch, *md->h, *md->hctx, md->batchSMs ? nsm : Bb.sms);
          MUST(cuEventRecord(b1, *md->batch));
          sleep_us(200);  // the batch's first kernel holds its SMs
        }
        MUST(cuEventRecord(e0, *md->probe));
        if (md->drain) MUST(cuStreamWaitEvent(*md->probe, b1, 0));
        for (int i = 0; i < P; i++) {
          launch_probe(*md->probe, i);
          if (i == 0) MUST(cuEventRecord(e1, *md->probe));
        }
        MUST(cuEventRecord(eP, *md->probe));
        MUST(cuStreamSynchronize(*md->probe));
        float f = 0, a = 0, b = 0;
        MUST(cuEventElapsedTime(&f, e0, e1));
        MUST(cuEventElapsedTime(&a, e0, eP));
        if (md->batch) {
          MUST(cuStreamSynchronize(*md->batch));
          MUST(cuEventElapsedTime(&b, b0, b1));
        }
        MUST(cuMemcpyDtoH(host, rec, sizeof host));
        int on = 0, on1 = 0;
        for (int i = 0; i < P * BLOCKS; i++) {
          int sm = (int)host[i * 3];
          if (sm >= 0 && sm < MAXSM && T[sm]) {
            on++;
            if (i < BLOCKS) on1++;
          }
        }
        first[idx] = f * 1000, allp[idx] = a * 1000, bat[idx] = b * 1000, ont[idx] = on, ont1[idx] = on1;
        printf("%s\t%s\t%d\t%.0f\t%.0f\t%.0f\t%d\t%d\n", kinds[k].name, md->name, r, f * 1000.0, a * 1000.0, b * 1000.0, on, on1);
      }
    }
  }
  printf("# summary: batch mode | first P50 P90 | all P50 P90 | batch P50 | blocks on T, all (of %d) and first probe (of %d), P50\n",
         P * BLOCKS, BLOCKS);
  for (int k = 0; k < (int)NK; k++)
    for (int m = 0; m < (int)NM; m++) {
      int o = (k * NM + m) * reps;
      printf("# %-10s %-10s | %7.0f %7.0f | %7.0f %7.0f | %7.0f | %5.0f %4.0f\n", kinds[k].name, modes[m].name,
             pct(first + o, reps, .5), pct(first + o, reps, .9), pct(allp + o, reps, .5), pct(allp + o, reps, .9),
             pct(bat + o, reps, .5), pct(ont + o, reps, .5), pct(ont1 + o, reps, .5));
    }
  return 0;
}
