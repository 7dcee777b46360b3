// Kernels for the PTX reader's tests: every kind of parameter a launch
// packs. clang.ptx beside this file is clang's PTX of it (clang.sh); nvcc's
// is made by nvcc.sh where the CUDA toolkit is installed. The expected
// layouts, by the CUDA ABI (each parameter at its alignment), are in
// ptxsig_test.go.
#ifdef __NVCC__
#define INDEX (blockIdx.x * blockDim.x + threadIdx.x)
#define CLOCK() clock64()
#define FMA fmaf
#else // clang --cuda-device-only -nocudainc: no CUDA headers
#define __global__ __attribute__((global))
#define INDEX (__nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() + __nvvm_read_ptx_sreg_tid_x())
#define CLOCK() __nvvm_read_ptx_sreg_clock64()
#define FMA __builtin_fmaf
#endif
typedef unsigned long long u64;

struct Small { char c; };                                     // 1 byte
struct __attribute__((aligned(16))) Vec4 { float x, y, z, w; }; // 16 bytes, aligned to 16
struct Big { double d[3]; int tail; };                        // 32 bytes, aligned to 8
struct Odd { char c[13]; };                                   // 13 bytes, aligned to 1
struct Arr { int a[64]; };                                    // 256 bytes, aligned to 4

extern "C" {

// 8-, 16-, 32- and 64-bit scalars, mixed so that each is padded to its size.
__global__ void scalars(char c, short s, int i, long long l, float f, double d, u64 u, unsigned char uc, int* out) {
  out[0] = c + s + i + (int)l + (int)f + (int)d + (int)u + uc;
}

// Pointers, one restrict, between 32-bit values.
__global__ void pointers(int n, float* a, const double* __restrict__ b, int m) {
  a[n] = (float)b[m];
}

// Structs by value: byte arrays at their alignment (.align 16 .b8 [16], ...).
__global__ void aggregates(Small s, Vec4 v, Big b, Odd o, Arr r, int after, float* out) {
  out[0] = s.c + v.w + (float)b.d[2] + b.tail + o.c[12] + r.a[63] + after;
}

// Launch bounds: .maxntid and .minnctapersm between the list and the body.
#ifdef __NVCC__
__global__ void __launch_bounds__(256, 2) bounded(int* out) { out[INDEX] = 1; }
#else
__global__ void __attribute__((launch_bounds(256, 2))) bounded(int* out) { out[INDEX] = 1; }
#endif

// No parameters.
__global__ void none() {}

// The repository's kernels (kernels/chain.cu, kernels/triad.cu).
__global__ void chain(float* out, int n, int steps) {
  int i = INDEX;
  if (i >= n) return;
  float x = (float)(i & 1023) * 1e-3f;
  for (int s = 0; s < steps; s++) x = FMA(x, 0.999f, 0.001f);
  out[i] = x;
}

__global__ void spin(u64 cycles) {
  u64 start = CLOCK();
  while (CLOCK() - start < cycles) {
  }
}

__global__ void triad(float* a, const float* __restrict__ b, const float* __restrict__ c, float s, unsigned n) {
  for (u64 i = 0; i < n; i++) a[i] = FMA(s, c[i], b[i]);
}

}
