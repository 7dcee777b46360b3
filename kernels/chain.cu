// The day-94 workload: a dependent FMA chain, so that run time is set by the
// number of steps and nothing else. chain.ptx beside this file is its PTX.
// Made with: nvcc -ptx -arch=compute_80 -O3 -o chain.ptx chain.cu  (nvcc 13.0)
extern "C" __global__ void chain(float* out, int n, int steps) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = (float)(i & 1023) * 1e-3f;
  for (int s = 0; s < steps; s++) x = fmaf(x, 0.999f, 0.001f);
  out[i] = x;
}

// spin busy-waits for a number of clock cycles per thread: a kernel whose
// duration is known, for throughput and isolation tests.
extern "C" __global__ void spin(unsigned long long cycles) {
  unsigned long long start = clock64();
  while (clock64() - start < cycles) { }
}
