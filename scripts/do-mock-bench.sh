#!/usr/bin/env bash
# Tenant.Do's cost through the real cgo binding on a machine without a GPU
# (fcsp's BenchmarkDoCgo): builds the stand-in libcuda of internal/cuda's
# binding test and runs the benchmark against it. COUNT and BENCHTIME
# override -count (6) and -benchtime (20000x); further arguments go to
# go test.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"${CC:-gcc}" -O2 -shared -fPIC -o "$dir/libmockcuda.so" internal/cuda/testdata/mockcuda.c
FCSP_DO_MOCK_LIB="$dir/libmockcuda.so" FCSP_LIBCUDA="$dir/libmockcuda.so" \
  go test -run '^$' -bench '^BenchmarkDoCgo$' -count "${COUNT:-6}" -benchtime "${BENCHTIME:-20000x}" "$@" ./fcsp/
