// The STREAM triad, a[i] = b[i] + s*c[i]: 12 bytes of memory traffic per
// element and one FMA, so its run time is set by memory bandwidth. A
// grid-stride loop, so a grid sized to the SMs (not to n) covers any n.
// triad.ptx beside this file is written by hand to match it (there was no
// nvcc where it was written): one element per iteration, where nvcc -O3
// would unroll the loop (more loads in flight per thread, so somewhat more
// bandwidth from few SMs). Comparisons are within one kernel, so it does
// not matter which.
extern "C" __global__ void triad(float* a, const float* __restrict__ b,
                                 const float* __restrict__ c, float s, unsigned n) {
  for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x)
    a[i] = fmaf(s, c[i], b[i]);
}
