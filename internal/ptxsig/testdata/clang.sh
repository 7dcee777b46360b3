#!/bin/sh
# clang's PTX of kernels.cu (clang 14: apt-get install clang-14).
cd "$(dirname "$0")" && clang-14 -x cuda --cuda-device-only -nocudainc -nocudalib --cuda-gpu-arch=sm_80 -O2 -S -o clang.ptx kernels.cu
