#!/bin/sh
# nvcc's PTX of kernels.cu, on a machine with the CUDA toolkit; commit nvcc.ptx.
cd "$(dirname "$0")" && nvcc -ptx -arch=compute_80 -O3 -o nvcc.ptx kernels.cu
