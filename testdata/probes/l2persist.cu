// Probe: does an L2 persisting window keep a latency tenant's weights in L2
// beside a neighbour partition that streams through the cache?
//
// Layout as examples/gemm's part16 mode: a 16-SM green context runs the
// interactive cuBLAS bf16 GEMM (m=64, n=k=4096; B is 32 MiB, the "weights"),
// one at a time, latency per call; a green context on the rest runs
// 8192^3 bf16 GEMMs back to back. Phases, repeated twice, interleaved:
// alone, alone+window, batch, batch+window. The window is the stream's
// access policy window over B (hitProp persisting, missProp streaming)
// with the device's persisting set-aside (cuCtxSetLimit) sized to B.
//
//   nvcc -O2 -std=c++17 -o l2persist l2persist.cu -lcuda -lcublas
//   ./l2persist [seconds per phase, default 3]
#include <cuda.h>
#include <cublas_v2.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char *s_ = 0; cuGetErrorName(r_, &s_); \
  std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_ ? s_ : "?"); std::exit(1); } } while (0)
#define CB(x) do { cublasStatus_t s_ = (x); if (s_ != CUBLAS_STATUS_SUCCESS) { \
  std::fprintf(stderr, "%s:%d %s: cublas %d\n", __FILE__, __LINE__, #x, (int)s_); std::exit(1); } } while (0)

struct Side {
  CUgreenCtx g; CUcontext ctx; CUstream s; cublasHandle_t h; int sms;
  CUdeviceptr a, b, c, ws; int m, n, k;
};

static void make(Side &x, CUdevice dev, CUdevResource *res, int m, int n, int k) {
  CUdevResourceDesc d; CK(cuDevResourceGenerateDesc(&d, res, 1));
  CK(cuGreenCtxCreate(&x.g, d, dev, CU_GREEN_CTX_DEFAULT_STREAM));
  CK(cuCtxFromGreenCtx(&x.ctx, x.g));
  CK(cuGreenCtxStreamCreate(&x.s, x.g, CU_STREAM_NON_BLOCKING, 0));
  x.sms = res->sm.smCount; x.m = m; x.n = n; x.k = k;
  CK(cuCtxSetCurrent(x.ctx));
  CK(cuMemAlloc(&x.a, 2ull * m * k)); CK(cuMemAlloc(&x.b, 2ull * k * n)); CK(cuMemAlloc(&x.c, 2ull * m * n));
  CK(cuMemAlloc(&x.ws, 32u << 20));
  CK(cuMemsetD16Async(x.a, 0x3f80, (size_t)m * k, x.s)); CK(cuMemsetD16Async(x.b, 0x3f00, (size_t)k * n, x.s));
  CK(cuMemsetD16Async(x.c, 0, (size_t)m * n, x.s));
  CB(cublasCreate(&x.h)); CB(cublasSetStream(x.h, (cudaStream_t)x.s));
  CB(cublasSetSmCountTarget(x.h, x.sms)); CB(cublasSetWorkspace(x.h, (void *)x.ws, 32u << 20));
  CK(cuStreamSynchronize(x.s));
}

static void gemm(Side &x) {
  float al = 1, be = 0;
  CB(cublasGemmEx(x.h, CUBLAS_OP_N, CUBLAS_OP_N, x.m, x.n, x.k, &al, (void *)x.a, CUDA_R_16BF, x.m,
                  (void *)x.b, CUDA_R_16BF, x.k, &be, (void *)x.c, CUDA_R_16BF, x.m, CUBLAS_COMPUTE_32F,
                  CUBLAS_GEMM_DEFAULT));
}

static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

int main(int argc, char **argv) {
  double secs = argc > 1 ? std::atof(argv[1]) : 3;
  CK(cuInit(0)); CUdevice dev; CK(cuDeviceGet(&dev, 0));
  int l2 = 0, maxPersist = 0, maxWin = 0;
  CK(cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev));
  CK(cuDeviceGetAttribute(&maxPersist, CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, dev));
  CK(cuDeviceGetAttribute(&maxWin, CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, dev));
  std::printf("L2 %d bytes, max persisting %d, max window %d\n", l2, maxPersist, maxWin);
  CUcontext prim; CK(cuDevicePrimaryCtxRetain(&prim, dev)); CK(cuCtxSetCurrent(prim));
  CUdevResource all; CK(cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM));
  CUdevResource part, rest; unsigned ng = 1;
  CK(cuDevSmResourceSplitByCount(&part, &ng, &all, &rest, 0, 16));
  Side in{}, bt{};
  make(in, dev, &part, 64, 4096, 4096);
  make(bt, dev, &rest, 8192, 8192, 8192);
  std::printf("interactive %d SMs, batch %d SMs\n", in.sms, bt.sms);

  // The set-aside: try on the interactive green context, then the primary.
  size_t want = std::min<size_t>(maxPersist, 2ull * in.k * in.n);
  CK(cuCtxSetCurrent(in.ctx));
  CUresult lr = cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, want);
  const char *ln = 0; cuGetErrorName(lr, &ln);
  size_t got = 0; cuCtxGetLimit(&got, CU_LIMIT_PERSISTING_L2_CACHE_SIZE);
  std::printf("cuCtxSetLimit(persisting, %zu) on the green context: %s, now %zu\n", want, ln, got);
  if (lr != CUDA_SUCCESS) {
    CK(cuCtxSetCurrent(prim));
    lr = cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, want); cuGetErrorName(lr, &ln);
    cuCtxGetLimit(&got, CU_LIMIT_PERSISTING_L2_CACHE_SIZE);
    std::printf("cuCtxSetLimit on the primary context: %s, now %zu\n", ln, got);
    CK(cuCtxSetCurrent(in.ctx));
  }
  auto window = [&](bool on) {
    CUstreamAttrValue v{};
    if (on) {
      size_t nb = std::min<size_t>(2ull * in.k * in.n, (size_t)maxWin);
      v.accessPolicyWindow.base_ptr = (void *)in.b;
      v.accessPolicyWindow.num_bytes = nb;
      v.accessPolicyWindow.hitRatio = std::min(1.0f, (float)got / (float)nb);
      v.accessPolicyWindow.hitProp = CU_ACCESS_PROPERTY_PERSISTING;
      v.accessPolicyWindow.missProp = CU_ACCESS_PROPERTY_STREAMING;
    }
    CUresult r = cuStreamSetAttribute(in.s, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v);
    if (!on) cuCtxResetPersistingL2Cache();
    const char *n = 0; cuGetErrorName(r, &n);
    return r == CUDA_SUCCESS;
  };

  std::atomic<bool> batchOn{false}, quit{false};
  std::atomic<long> batchDone{0};
  std::thread bth([&] {
    CK(cuCtxSetCurrent(bt.ctx));
    while (!quit.load()) {
      if (!batchOn.load()) { std::this_thread::sleep_for(std::chrono::milliseconds(1)); continue; }
      gemm(bt); gemm(bt); CK(cuStreamSynchronize(bt.s)); batchDone += 2;
    }
  });
  for (int i = 0; i < 20; i++) { gemm(in); } CK(cuStreamSynchronize(in.s));
  std::printf("%-14s %8s %8s %8s %8s %10s\n", "phase", "calls", "P50us", "P99us", "maxus", "batchTF/s");
  const char *names[4] = {"alone", "alone+window", "batch", "batch+window"};
  for (int rep = 0; rep < 2; rep++) {
    for (int ph = 0; ph < 4; ph++) {
      bool withBatch = ph >= 2, win = ph & 1;
      bool ok = window(win);
      batchOn = withBatch;
      if (withBatch) std::this_thread::sleep_for(std::chrono::milliseconds(200));
      long b0 = batchDone.load(); double t0 = now();
      std::vector<double> lat;
      for (double end = now() + secs; now() < end;) {
        double s = now(); gemm(in); CK(cuStreamSynchronize(in.s)); lat.push_back((now() - s) * 1e6);
      }
      double el = now() - t0; long bn = batchDone.load() - b0;
      batchOn = false;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      std::sort(lat.begin(), lat.end());
      auto p = [&](double q) { return lat[std::min(lat.size() - 1, (size_t)(q * lat.size()))]; };
      std::printf("%-14s %8zu %8.1f %8.1f %8.1f %10.1f%s\n", names[ph], lat.size(), p(0.5), p(0.99), lat.back(),
                  withBatch ? bn * 2.0 * 8192.0 * 8192.0 * 8192.0 / el / 1e12 : 0.0, win && !ok ? "  (window refused)" : "");
    }
  }
  quit = true; bth.join();
  return 0;
}
