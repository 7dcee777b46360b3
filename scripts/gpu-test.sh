#!/usr/bin/env bash
# Builds every GPU test and example here (no CUDA needed), then runs them on a
# machine with an NVIDIA driver. One call does both where both are possible:
#
#   scripts/gpu-test.sh build   # on the CPU machine: cross-build into .bin/
#   scripts/gpu-test.sh build-moves # on the CPU machine: only what moves needs
#   scripts/gpu-test.sh run     # on the GPU machine: run what .bin/ holds
#   scripts/gpu-test.sh         # build, then run if a GPU is present
#   scripts/gpu-test.sh hot     # issue 19's admission figures only (~30 s, CPU)
#   scripts/gpu-test.sh sanitize # on the GPU machine: the GPU tests under
#                                # compute-sanitizer memcheck (also FCSP_SANITIZE=1 with run)
#   scripts/gpu-test.sh lag      # on the GPU machine: issue 17's share, lag and P99 runs (~50 s)
#   scripts/gpu-test.sh meter    # on the GPU machine: Do and graph GPU shares, BenchmarkDo (~20 s)
#   scripts/gpu-test.sh dofast   # on the GPU machine: Do's context switch, BenchmarkDo x6 (~20 s)
#   scripts/gpu-test.sh bandwidth # on the GPU machine: the memory-bandwidth
#                                # GPU test and examples/bandwidth only (~15 s)
#   scripts/gpu-test.sh clocks   # on the GPU machine: issue 18's NVML clocks and
#                                # power, and the gemm sweep with them (~50 s)
#   scripts/gpu-test.sh storm    # on the GPU machine: issue 29's server storm,
#                                # every layout with MPS (examples/storm, ~7 min)
#   scripts/gpu-test.sh issue41  # on the GPU machine: issue 41's bursty load
#                                # (3 s / 1 s and 300 ms / 100 ms, every layout
#                                # with MPS, charts) and cold start (~9 min)
#   scripts/gpu-test.sh issue56  # on the GPU machine: issue 56's must-show in
#                                # one call: every layout with MPS, the steer
#                                # variants, the batch alone with and without
#                                # the bound, 3 s / 1 s and 300 ms / 100 ms,
#                                # recoveries and moves, charts (~4-5 min)
#   scripts/gpu-test.sh moves    # on the GPU machine: issues 52's and 56's
#                                # must-shows in one call: issue56, the GPU
#                                # tests, a horizon variant, Reshape and
#                                # NewTenant against a base build (<= 585 s)
#   scripts/gpu-test.sh growprio # on the GPU machine: testdata/probes/growprio.cu
#                                # built with nvcc and run: a growth that does
#                                # not wait for the drain, with and without
#                                # stream priority across green contexts (~20 s)
#   scripts/gpu-test.sh issue54  # on the GPU machine: what the SDK's objects
#                                # and a cuBLAS handle hold, and examples/memlimit
#                                # under a 4 GiB limit, three ways (~3 min)
#   scripts/gpu-test.sh stall    # on the GPU machine (root): a tenant's kernel
#                                # that never ends beside the two classes, in
#                                # a server process and under MPS (~1-2 min)
#
# With the device tool: build here, then run `bash scripts/gpu-test.sh run`
# there with carry [".bin"]. Logs go to $OUT (or .bin/out) and the last lines
# printed are the summary.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=.bin
ROOT=$PWD
# Packages with GPU tests (each test skips itself where no driver is found).
PKGS=(internal/smpart greenctx fcsp tokenbucket examples/gemm) # binaries: .bin/<path with - for />.test

build() {
  set -e
  mkdir -p "$BIN"
  export CGO_ENABLED=1 GOOS=linux GOARCH=amd64
  for p in "${PKGS[@]}"; do
    [ -d "$p" ] && go test -c -ldflags="-s -w" -o "$BIN/${p//\//-}.test" "./$p"
  done
  for e in examples/*/ cmd/*/; do
    e=${e%/}; n=$(basename "$e")
    [ -f "$e/main.go" ] && go build -ldflags="-s -w" -o "$BIN/$n" "./$e"
  done
  build_atonce
  # The C++ yardstick, built and run on the GPU machine beside our examples.
  if [ -f ../shared/reference/day94_reference.cu ]; then
    mkdir -p "$BIN/ref" && cp ../shared/reference/day94_reference.cu "$BIN/ref/"
  fi
  cp kernels/chain.cu "$BIN/"
  cp scripts/mps-compare.sh "$BIN/"
  cp scripts/storm-mps.sh "$BIN/"
  set +e
  echo "built into $BIN: $(ls "$BIN" | tr '\n' ' ')"
}

# build_atonce builds storm-atonce: examples/storm whose latency class
# grows at once (internal/smmove's growth, chosen at link time), the A/B's
# variant that moves_only runs beside the default.
build_atonce() {
  go build -ldflags="-s -w -X github.com/fcsp-go/fcsp-go/internal/smmove.growth=at-once" -o "$BIN/storm-atonce" ./examples/storm
}

# build_moves builds what moves_only needs and nothing else (about 50 MiB),
# so that .bin and the tree travel within the device tool's 64 MiB: the
# GPU test binaries, storm, storm-atonce and the files the scripts copy.
# It empties .bin first (a .bin/fcsp-base.test kept aside is put back
# only where the whole still fits: MOVES_KEEP_BASE=1).
build_moves() {
  set -e
  local base=""
  if [ "${MOVES_KEEP_BASE:-0}" = 1 ] && [ -f "$BIN/fcsp-base.test" ]; then
    base=$(mktemp); cp "$BIN/fcsp-base.test" "$base"
  fi
  rm -rf "$BIN"; mkdir -p "$BIN"
  export CGO_ENABLED=1 GOOS=linux GOARCH=amd64
  for p in "${PKGS[@]}"; do
    [ -d "$p" ] && go test -c -ldflags="-s -w" -o "$BIN/${p//\//-}.test" "./$p"
  done
  go build -ldflags="-s -w" -o "$BIN/storm" ./examples/storm
  build_atonce
  cp kernels/chain.cu scripts/mps-compare.sh scripts/storm-mps.sh "$BIN/"
  [ -n "$base" ] && mv "$base" "$BIN/fcsp-base.test" && chmod +x "$BIN/fcsp-base.test"
  set +e
  echo "built into $BIN ($(du -sh "$BIN" | cut -f1)): $(ls "$BIN" | tr '\n' ' ')"
}

run() {
  # Logs go to $BIN/out and, where the device tool's $OUT exists, back in
  # one archive (it returns at most 8 files).
  local ret=${OUT:-}
  OUT=$PWD/$BIN/out; rm -rf "$OUT"; mkdir -p "$OUT"
  export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
  export NCCL_NVLS_ENABLE=0
  local summary=() rc=0
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
  if command -v nvcc >/dev/null; then
    (cd "$BIN" && nvcc -ptx -arch=compute_80 -O3 -o chain.nvcc.ptx chain.cu && cp chain.nvcc.ptx "$OUT/") \
      && summary+=("nvcc -ptx chain.cu: ok") || summary+=("nvcc -ptx chain.cu: FAILED")
    if [ -f "$BIN/ref/day94_reference.cu" ] && [ "${FCSP_SKIP_REF:-0}" != 1 ]; then
      (cd "$BIN/ref" && nvcc -O3 -arch=sm_90 -o day94ref day94_reference.cu -lcuda && ./day94ref) > "$OUT/reference.txt" 2>&1 \
        && summary+=("C++ reference: ok") || { summary+=("C++ reference: FAILED"); rc=1; }
    fi
  fi
  for p in "${PKGS[@]}"; do
    local name=${p//\//-}
    [ -x "$BIN/$name.test" ] || continue
    local pat=${FCSP_RUN:-GPU}
    # examples/gemm: also the no-device/no-cuBLAS test, after the GPU test
    # loaded the real cuBLAS in the same process (an explicit -cublas path
    # must still be used as given there).
    [ -z "${FCSP_RUN:-}" ] && [ "$p" = examples/gemm ] && pat='GPU|WithoutDevice'
    (cd "$p" && FCSP_PROBE_OUT="$OUT" "$ROOT/$BIN/$name.test" -test.v -test.count=1 -test.run "$pat" -test.timeout 300s) > "$OUT/$name.log" 2>&1
    local r=$?
    grep -E '^(--- |=== RUN|ok|FAIL|PASS)' "$OUT/$name.log" | grep -v '=== RUN' | tail -40
    summary+=("go test $p (GPU): $([ $r = 0 ] && echo ok || echo FAILED)"); [ $r = 0 ] || rc=1
  done
  # Benchmarks: the SDK against the raw driver, same process, same run.
  if [ "${FCSP_BENCH:-1}" = 1 ] && [ -x "$BIN/fcsp.test" ]; then
    (cd fcsp && "../$BIN/fcsp.test" -test.run '^$' -test.bench "${FCSP_BENCH_RE:-.}" -test.benchtime "${FCSP_BENCHTIME:-1s}" -test.benchmem -test.v) > "$OUT/bench-fcsp.txt" 2>&1
    local r=$?
    grep -E '^Benchmark|raw/ours' "$OUT/bench-fcsp.txt"
    summary+=("benchmarks fcsp: $([ $r = 0 ] && echo ok || echo FAILED)"); [ $r = 0 ] || rc=1
  fi
  # Examples, each with the arguments FCSP_ARGS_<name> gives.
  export FCSP_ARGS_day94="${FCSP_ARGS_day94:--svg $OUT/day94.svg}"
  export FCSP_ARGS_bench="${FCSP_ARGS_bench:--md -png $OUT/ratios.png}"
  export FCSP_ARGS_loadgen="${FCSP_ARGS_loadgen:--spawn $BIN/server -duration 5s}"
  export FCSP_ARGS_gemm="${FCSP_ARGS_gemm:--duration 3s -sweep-repeats 1 -json $OUT/gemm.json -png $OUT/gemm.png}"
  export FCSP_ARGS_hotpath="${FCSP_ARGS_hotpath:--md -rounds 6 -json $OUT/hotpath.json}"
  export FCSP_ARGS_reshape="${FCSP_ARGS_reshape:--phase 2s}"
  export FCSP_ARGS_bandwidth="${FCSP_ARGS_bandwidth:--json-out $OUT/bandwidth.json}"
  for x in ${FCSP_EXAMPLES:-day94 throttle bench loadgen faultdomain reshape gemm hotpath bandwidth interop}; do
    [ -x "$BIN/$x" ] || continue
    local var="FCSP_ARGS_$x"
    "$BIN/$x" ${!var:-} > "$OUT/$x.txt" 2>&1
    local r=$?
    tail -40 "$OUT/$x.txt"
    summary+=("example $x: $([ $r = 0 ] && echo ok || echo FAILED)"); [ $r = 0 ] || rc=1
  done
  # branch share: one clock read per launch; clock sources beside the floors
  # (atomic add; clock read + CAS) and limited vs unlimited admission, 6 rounds.
  if [ -x "$BIN/tokenbucket.test" ]; then
    (cd tokenbucket && "../$BIN/tokenbucket.test" -test.run '^$' -test.bench 'Clock|Floor|Admission' -test.count 6 -test.benchtime 2000000x) > "$OUT/bench-admission.txt" 2>&1
    local r=$?
    grep -E '^Benchmark' "$OUT/bench-admission.txt"
    summary+=("benchmarks tokenbucket admission: $([ $r = 0 ] && echo ok || echo FAILED)"); [ $r = 0 ] || rc=1
  fi
  # WithGPUShare with no per-kernel tuning (issue 17): chain kernels and
  # cuBLAS GEMMs (1024^3, 8192^3) at 0.25 beside an unlimited neighbour,
  # then the lag after a change of share, both ways. About 8 x the duration
  # plus 5 s (2s: ~21 s); exit 2 when a fraction or a lag misses its goal.
  if [ -x "$BIN/throttle" ] && [ "${FCSP_SHARE:-1}" = 1 ]; then
    "$BIN/throttle" -mode share -limit 0.25 -duration "${FCSP_SHARE_DURATION:-2s}" > "$OUT/throttle-share.txt" 2>&1
    local r=$?
    tail -24 "$OUT/throttle-share.txt"
    summary+=("example throttle -mode share: $([ $r = 0 ] && echo ok || echo FAILED)"); [ $r = 0 ] || rc=1
  fi
  # NVIDIA MPS beside our partitions (examples/gemm), only when asked: it
  # starts and quits the MPS daemon.
  if [ "${FCSP_MPS:-0}" = 1 ] && [ -x "$BIN/gemm" ]; then
    OUT=$OUT bash scripts/mps-compare.sh "$BIN/gemm" "${FCSP_MPS_DURATION:-10s}" > "$OUT/mps-compare.txt" 2>&1
    local r=$?
    tail -12 "$OUT/mps-compare.txt"
    summary+=("MPS comparison: $([ $r = 0 ] && echo ok || echo FAILED)"); [ $r = 0 ] || rc=1
  fi
  if [ "${FCSP_SANITIZE:-0}" = 1 ]; then
    sanitize_pkgs || rc=1
  fi
  [ -f "$OUT/reference.txt" ] && { echo "== C++ reference"; tail -16 "$OUT/reference.txt"; }
  echo "== summary"; printf '%s\n' "${summary[@]}" | tee "$OUT/summary.txt"
  if [ -n "$ret" ]; then
    tar czf "$ret/gpu-logs.tgz" -C "$OUT" . && cp "$OUT"/*.png "$ret/" 2>/dev/null
  fi
  return $rc
}

# sanitize_pkgs runs each package's GPU tests under compute-sanitizer's
# memcheck and fails on any memory error it reports. API errors are not
# reported: the negative tests provoke them on purpose (a cuMemAlloc past
# free memory, calls on destroyed handles) and check the SDK's answer.
# Appends to summary; needs OUT set (run or sanitize_only set it).
sanitize_pkgs() {
  local cs ret=0
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  if [ -z "$cs" ]; then
    echo "compute-sanitizer not found (install the CUDA toolkit's sanitizer or put it on PATH)"
    summary+=("compute-sanitizer memcheck: NOT RUN (no compute-sanitizer)"); return 1
  fi
  for p in ${FCSP_SANITIZE_PKGS:-${PKGS[*]}}; do
    local name=${p//\//-}
    [ -x "$BIN/$name.test" ] || continue
    (cd "$p" && "$cs" --tool memcheck --report-api-errors no --leak-check no --error-exitcode 99 \
       --target-processes all "$ROOT/$BIN/$name.test" -test.v -test.count=1 -test.run "${FCSP_SANITIZE_RUN:-${FCSP_RUN:-GPU}}" -test.timeout 1200s) \
       > "$OUT/sanitize-$name.log" 2>&1
    local r=$?
    grep -E '^(--- FAIL|ok|FAIL|PASS)|ERROR SUMMARY' "$OUT/sanitize-$name.log" | tail -20
    # Every process the sanitizer followed prints its own summary line;
    # all of them must say 0 errors.
    local bad
    bad=$(grep -E 'ERROR SUMMARY: [0-9]+ error' "$OUT/sanitize-$name.log" | grep -vc 'ERROR SUMMARY: 0 errors')
    if [ "$r" = 0 ] && [ "$bad" = 0 ] && grep -q 'ERROR SUMMARY' "$OUT/sanitize-$name.log"; then
      summary+=("compute-sanitizer memcheck $p: ok (0 memory errors)")
    else
      summary+=("compute-sanitizer memcheck $p: FAILED (exit $r, $bad summaries with errors)"); ret=1
    fi
  done
  return $ret
}

# only_start NAME begins each *_only run: its logs in $BIN/out-NAME, emptied
# ($OUT; the device tool's own $OUT kept in the caller's local ret, to copy
# the run's files back into), and the driver's libraries on the path.
only_start() {
  ret=${OUT:-}
  OUT=$PWD/$BIN/out-$1; rm -rf "$OUT"; mkdir -p "$OUT"
  export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
}

# lag_only is issue 17's short GPU run (about 50 s): GPU shares at 0.25 for
# chain kernels and cuBLAS GEMMs with the lag after a change of share both
# ways (examples/throttle -mode share), TestGPUShareChangeLag, and the
# loadgen's partitioned P99 against alone in three interleaved rounds.
lag_only() {
  local ret summary=() rc=0 r
  only_start lag
  "$BIN/throttle" -mode share -limit 0.25 -duration "${FCSP_SHARE_DURATION:-2s}" > "$OUT/throttle-share.txt" 2>&1
  r=$?; cat "$OUT/throttle-share.txt"
  summary+=("throttle -mode share: $([ $r = 0 ] && echo ok || echo "FAILED (exit $r; 2: a fraction or a lag missed its goal)")"); [ $r = 0 ] || rc=1
  (cd fcsp && "$ROOT/$BIN/fcsp.test" -test.v -test.count=1 -test.run '^TestGPUShareChangeLag$' -test.timeout 60s) > "$OUT/fcsp-lag.log" 2>&1
  r=$?; grep -E 'lag after|spin kernel|^(--- |ok|FAIL|PASS)' "$OUT/fcsp-lag.log"
  summary+=("TestGPUShareChangeLag: $([ $r = 0 ] && echo ok || echo FAILED)"); [ $r = 0 ] || rc=1
  "$BIN/loadgen" -spawn "$BIN/server" -modes partitioned -rounds 3 -warmup 500ms -duration "${FCSP_LOADGEN_DURATION:-2s}" -- -batch-gpu-share 0.9 > "$OUT/loadgen-rounds.txt" 2>&1
  r=$?; cat "$OUT/loadgen-rounds.txt"
  summary+=("loadgen partitioned, 3 rounds: $([ $r = 0 ] && echo ok || echo FAILED)"); [ $r = 0 ] || rc=1
  echo "== summary"; printf '%s\n' "${summary[@]}" | tee "$OUT/summary-lag.txt"
  [ -n "$ret" ] && cp "$OUT"/*.txt "$OUT"/*.log "$ret/" 2>/dev/null
  return $rc
}

# meter_only is the meter branch's short GPU run (about 20 s): a tenant
# working through Do, then through LaunchGraph, limited to 0.25 beside an
# unlimited neighbour (TestGPUDoShare, TestGPUGraphShare: fraction of its
# own unlimited rate, band 0.2375..0.2625), and BenchmarkDo (Do's overhead
# against a raw cgo call, unmetered and metered; BenchmarkDoKey).
meter_only() {
  local ret summary=() rc=0 r
  only_start meter
  (cd fcsp && "$ROOT/$BIN/fcsp.test" -test.v -test.count=1 -test.run '^TestGPU(Do|Graph)Share$' -test.timeout 90s) > "$OUT/fcsp-meter.log" 2>&1
  r=$?; grep -E 'fraction|^(--- |ok|FAIL|PASS)|Error' "$OUT/fcsp-meter.log"
  summary+=("TestGPUDoShare, TestGPUGraphShare: $([ $r = 0 ] && echo ok || echo FAILED)"); [ $r = 0 ] || rc=1
  (cd fcsp && "$ROOT/$BIN/fcsp.test" -test.run '^$' -test.bench '^BenchmarkDo' -test.benchtime 20000x -test.benchmem) > "$OUT/bench-do.txt" 2>&1
  r=$?; grep -E '^Benchmark' "$OUT/bench-do.txt"
  summary+=("BenchmarkDo: $([ $r = 0 ] && echo ok || echo FAILED)"); [ $r = 0 ] || rc=1
  echo "== summary"; printf '%s\n' "${summary[@]}" | tee "$OUT/summary-meter.txt"
  [ -n "$ret" ] && cp "$OUT"/*.txt "$OUT"/*.log "$ret/" 2>/dev/null
  return $rc
}

# dofast_only is the dofast branch's GPU run (about 20 s): Do's context
# switch on the driver (TestGPUDoSwapsAndRestoresTheThreadsContext,
# TestGPUDoMakesTheGreenContextCurrent), then BenchmarkDo six times over, so
# that Do's overhead (do minus raw, the raw cgo call of the same run beside
# it) is a range, not one sample.
dofast_only() {
  local ret summary=() rc=0 r
  only_start dofast
  (cd fcsp && "$ROOT/$BIN/fcsp.test" -test.v -test.count=1 -test.run '^TestGPUDo(SwapsAndRestoresTheThreadsContext|MakesTheGreenContextCurrent)$' -test.timeout 60s) > "$OUT/fcsp-dofast.log" 2>&1
  r=$?; grep -E '^(--- |ok|FAIL|PASS)|Error' "$OUT/fcsp-dofast.log"
  summary+=("TestGPUDoSwapsAndRestoresTheThreadsContext, TestGPUDoMakesTheGreenContextCurrent: $([ $r = 0 ] && echo ok || echo FAILED)"); [ $r = 0 ] || rc=1
  (cd fcsp && "$ROOT/$BIN/fcsp.test" -test.run '^$' -test.bench '^BenchmarkDo$' -test.count 6 -test.benchtime 20000x -test.benchmem) > "$OUT/bench-dofast.txt" 2>&1
  r=$?; grep -E '^Benchmark|FAIL|panic' "$OUT/bench-dofast.txt"
  summary+=("BenchmarkDo x6: $([ $r = 0 ] && echo ok || echo FAILED)"); [ $r = 0 ] || rc=1
  echo "== summary"; printf '%s\n' "${summary[@]}" | tee "$OUT/summary-dofast.txt"
  [ -n "$ret" ] && cp "$OUT"/*.txt "$ret/" 2>/dev/null
  return $rc
}

# bandwidth_only runs issue 17's memory-bandwidth work alone (about 15 s):
# the GPU test that the slowdown shows and the floor buys latency back, then
# examples/bandwidth's table (its JSON in $OUT/bandwidth.json).
bandwidth_only() {
  local ret summary=() rc=0
  only_start bandwidth
  (cd fcsp && "$ROOT/$BIN/fcsp.test" -test.v -test.count=1 -test.run 'TestGPUBandwidth' -test.timeout 120s) > "$OUT/bandwidth-test.log" 2>&1
  local r=$?
  grep -E '^(--- |ok|FAIL|PASS)|bandwidth_gpu_test' "$OUT/bandwidth-test.log" | tail -20
  summary+=("go test fcsp -run TestGPUBandwidth: $([ $r = 0 ] && echo ok || echo FAILED)"); [ $r = 0 ] || rc=1
  "$BIN/bandwidth" -json-out "$OUT/bandwidth.json" > "$OUT/bandwidth.txt" 2>&1
  r=$?
  tail -20 "$OUT/bandwidth.txt"
  summary+=("example bandwidth: $([ $r = 0 ] && echo ok || echo FAILED)"); [ $r = 0 ] || rc=1
  echo "== summary"; printf '%s\n' "${summary[@]}" | tee "$OUT/summary-bandwidth.txt"
  [ -n "$ret" ] && cp "$OUT"/*.txt "$OUT"/*.log "$OUT"/*.json "$ret/" 2>/dev/null
  return $rc
}

# clocks_only is issue 18's short GPU run (about 50 s): the NVML clock and
# power facts (TestGPUNVMLClocksAndPower), a 4-row sweep through the
# example's own code (TestGPUSweepReportsClocks, ~4 s), then examples/gemm's
# full sweep: baseline, 8,16,32,64,rest and 8,16 without the SM count hint,
# 2 interleaved repeats of FCSP_CLOCKS_DURATION (2s) each, with NVML's SM
# clock, power and clock reasons per row ($OUT/sweep.json, sweep.png).
clocks_only() {
  local ret summary=() rc=0 r
  only_start clocks
  (cd fcsp && "$ROOT/$BIN/fcsp.test" -test.v -test.count=1 -test.run '^TestGPUNVMLClocksAndPower$' -test.timeout 60s) > "$OUT/fcsp-nvml.log" 2>&1
  r=$?; grep -E 'nvml_gpu_test|^(--- |ok|FAIL|PASS)' "$OUT/fcsp-nvml.log"
  summary+=("TestGPUNVMLClocksAndPower: $([ $r = 0 ] && echo ok || echo FAILED)"); [ $r = 0 ] || rc=1
  (cd examples/gemm && "$ROOT/$BIN/examples-gemm.test" -test.v -test.count=1 -test.run '^TestGPUSweepReportsClocks$' -test.timeout 120s) > "$OUT/gemm-sweep-test.log" 2>&1
  r=$?; grep -E 'sweep_gpu_test|^(--- |ok|FAIL|PASS)' "$OUT/gemm-sweep-test.log" | tail -12
  summary+=("TestGPUSweepReportsClocks: $([ $r = 0 ] && echo ok || echo FAILED)"); [ $r = 0 ] || rc=1
  "$BIN/gemm" -modes sweep -duration "${FCSP_CLOCKS_DURATION:-2s}" -sweep-repeats 2 -json "$OUT/sweep.json" -png "$OUT/sweep.png" > "$OUT/gemm-sweep.txt" 2>&1
  r=$?; cat "$OUT/gemm-sweep.txt"
  summary+=("gemm -modes sweep: $([ $r = 0 ] && echo ok || echo FAILED)"); [ $r = 0 ] || rc=1
  echo "== summary"; printf '%s\n' "${summary[@]}" | tee "$OUT/summary-clocks.txt"
  [ -n "$ret" ] && cp "$OUT"/*.txt "$OUT"/*.log "$OUT"/*.json "$OUT"/*.png "$ret/" 2>/dev/null
  return $rc
}

# storm_only is issue 29's run (about 7 minutes): examples/storm through
# scripts/storm-mps.sh, every layout (alone, partitioned, shared, mps) in
# STORM_ROUNDS (3) interleaved rounds, K 1,4,16, the storm rows none and all
# at every K and each kind at K=1, the %smid check and the
# CUDA_DEVICE_MAX_CONNECTIONS=1 row. Exit non-zero only for an error or SM
# sets that meet in the partitioned layout; the must-show checks print
# PASS/FAIL. Output in $OUT/storm.txt and storm.json.
storm_only() {
  local ret summary=() rc=0 r
  only_start storm
  OUT=$OUT bash scripts/storm-mps.sh "$BIN/storm" ${FCSP_STORM_ARGS:-} > "$OUT/storm-run.txt" 2>&1
  r=$?; sed -n '/^### Interactive latency/,$p' "$OUT/storm-run.txt"; [ $r = 0 ] || tail -5 "$OUT/storm-run.txt"
  summary+=("examples/storm (storm-mps.sh): $([ $r = 0 ] && echo ok || echo "FAILED (exit $r)")"); [ $r = 0 ] || rc=1
  echo "== summary"; printf '%s\n' "${summary[@]}" | tee "$OUT/summary-storm.txt"
  [ -n "$ret" ] && cp "$OUT"/*.txt "$OUT"/*.json "$ret/" 2>/dev/null
  return $rc
}

# issue41_only is issue 41's run (about 9 minutes): examples/storm through
# scripts/storm-mps.sh, the bursty load of 3 s / 1 s (4 cycles) and the
# cold start (first 1 s against 2 s) in 2 rounds, then the fast variant
# (300 ms / 100 ms, 10 cycles) in 1; the layouts split16, split32,
# split48, steer and mps interleaved in each round. The checks print
# PASS/FAIL; exit non-zero only for an error. Output in $OUT:
# issue41.txt, .json, .svg and issue41-fast.*.
issue41_only() {
  local ret summary=() rc=0 r
  only_start issue41
  OUT=$OUT STORM_BURST=3s/1s STORM_CYCLES=4 STORM_COLDSTART=1s/2s STORM_ROUNDS=2 STORM_TAG=issue41 \
    bash scripts/storm-mps.sh "$BIN/storm" > "$OUT/issue41-run.txt" 2>&1
  r=$?; sed -n '/^### /,$p' "$OUT/issue41-run.txt"; [ $r = 0 ] || tail -5 "$OUT/issue41-run.txt"
  summary+=("issue 41, 3 s / 1 s and the cold start: $([ $r = 0 ] && echo ok || echo "FAILED (exit $r)")"); [ $r = 0 ] || rc=1
  OUT=$OUT STORM_BURST=300ms/100ms STORM_CYCLES=10 STORM_ROUNDS=1 STORM_TAG=issue41-fast \
    bash scripts/storm-mps.sh "$BIN/storm" > "$OUT/issue41-fast-run.txt" 2>&1
  r=$?; sed -n '/^### /,$p' "$OUT/issue41-fast-run.txt"; [ $r = 0 ] || tail -5 "$OUT/issue41-fast-run.txt"
  summary+=("issue 41, 300 ms / 100 ms: $([ $r = 0 ] && echo ok || echo "FAILED (exit $r)")"); [ $r = 0 ] || rc=1
  echo "== summary"; printf '%s\n' "${summary[@]}" | tee "$OUT/summary-issue41.txt"
  [ -n "$ret" ] && cp "$OUT"/issue41.txt "$OUT"/issue41.json "$OUT"/issue41.svg "$OUT"/issue41-fast.txt "$OUT"/issue41-fast.json \
    "$OUT"/issue41-fast.svg "$OUT"/summary-issue41.txt "$ret/" 2>/dev/null
  return $rc
}

# issue56_only is issue 56's must-show in one call (about 4-5 minutes on
# an H100; storm prints its own estimate first): examples/storm -burst
# through scripts/storm-mps.sh, every layout the list needs interleaved in
# each round, MPS 12%/88% among them: split16, split48, steer (the batch's
# queue bounded, the default horizon; its target ISSUE56_SPLIT48X, 1.13,
# times the round's split48 burst P99), steer-nobound (no bound), steer-r48
# (a target of 1.2x the round's split48 burst P99: the recoveries),
# steer-rel (1.2x the class's own P99 at 48 SMs, which the pool measures),
# steer-idle and
# steer-idle-nobound (no interactive request: the batch alone, with and
# without the bound) and mps. First 3 s / 1 s, 3 cycles, 1 round (about
# 2 min), then 300 ms / 100 ms, 10 cycles, 2 rounds (about 2 min). Each
# prints the medians, the reaction table (each burst's recovery against
# 1.2x split48's burst P99, each growth's wait for queued work against
# the batch's own GEMM time, Stats' move and recovery histograms) and the
# must-show checks as PASS/FAIL; exit non-zero only for an error.
# ISSUE56_TARGET (default 300us) is -target (steer's with ISSUE56_SPLIT48X=0); ISSUE56_CYCLES,
# ISSUE56_ROUNDS, ISSUE56_FAST_ROUNDS resize it. Output in $OUT (8 files):
# issue56.txt, .json, .svg, issue56-fast.txt, .json, .svg,
# issue56-stderr.txt (both runs' pool log: each move and Reshape) and
# summary-issue56.txt (the checks of both). ISSUE56_STORM names another
# storm binary (storm-atonce), ISSUE56_DIR the folder under .bin for its
# output (out-issue56).
issue56_only() {
  local ret summary=() rc=0 r tag storm=${ISSUE56_STORM:-$BIN/storm}
  only_start "${ISSUE56_DIR:-issue56}"
  local layouts=${ISSUE56_LAYOUTS:-split16,split48,steer,steer-nobound,steer-r48,steer-rel,steer-idle,steer-idle-nobound,mps}
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt" 2>&1
  summary+=("card: $(cat "$OUT/gpu.txt")")
  for tag in issue56 issue56-fast; do
    if [ $tag = issue56 ]; then
      set -- 3s/1s "${ISSUE56_CYCLES:-3}" "${ISSUE56_ROUNDS:-1}"
    else
      set -- 300ms/100ms 10 "${ISSUE56_FAST_ROUNDS:-2}"
    fi
    OUT=$OUT STORM_BURST=$1 STORM_CYCLES=$2 STORM_ROUNDS=$3 STORM_LAYOUTS=$layouts STORM_TARGET=${ISSUE56_TARGET:-300us} STORM_TAG=$tag \
      bash scripts/storm-mps.sh "$storm" -log-moves -target-split48 "${ISSUE56_SPLIT48X:-1.13}" > "$OUT/$tag-run.txt" 2>&1
    r=$?; head -1 "$OUT/$tag-run.txt"; sed -n '/^### /,$p' "$OUT/$tag-run.txt"; [ $r = 0 ] || tail -5 "$OUT/$tag-run.txt"
    summary+=("issue 56, $1, $2 cycles, $3 round(s): $([ $r = 0 ] && echo ok || echo "FAILED (exit $r)")"); [ $r = 0 ] || rc=1
    while IFS= read -r l; do summary+=("  $l"); done < <(grep -E '^(PASS|FAIL|n/a) ' "$OUT/$tag.txt" 2>/dev/null)
    { echo "== $tag"; cat "$OUT/$tag-stderr.txt" 2>/dev/null; } >> "$OUT/issue56-stderr.txt"
  done
  echo "== summary"; printf '%s\n' "${summary[@]}" | tee "$OUT/summary-issue56.txt"
  [ -n "$ret" ] && cp "$OUT"/issue56.txt "$OUT"/issue56.json "$OUT"/issue56.svg "$OUT"/issue56-fast.txt "$OUT"/issue56-fast.json \
    "$OUT"/issue56-fast.svg "$OUT"/issue56-stderr.txt "$OUT"/summary-issue56.txt "$ret/" 2>/dev/null
  return $rc
}

# moves_only is issues 52's and 56's GPU must-shows in one call of at most
# MOVES_CAP seconds (default 585; the device tool allows 600): issue 56's
# storm (issue56_only, MOVES_LAYOUTS, 2 cycles, 1 fast round, at most
# MOVES_STORM s), the growprio probe (growprio_only, about 20 s), each
# package's GPU tests (MOVES_TESTS, pkg:seconds, fcsp first), then while
# time lasts the A/B: issue 56's storm again with storm-atonce (the latency
# class's growth at once; MOVES_ATONCE_LAYOUTS, split16, split48, steer and
# steer-r48 by default) and, where .bin/fcsp-base.test was built at an
# earlier commit, Reshape and NewTenant against it
# (scripts/bench-compare.sh). Output in $OUT (or .bin/out-moves):
# summary.txt, i56.tgz (.bin/out-issue56), atonce.tgz
# (.bin/out-issue56-atonce), logs.tgz (each package's log, the bench's,
# the storms' output, growprio.tsv and its build's); summary.txt ends
# with the A/B side by side (scripts/storm-ab.py).
# Build its .bin with `scripts/gpu-test.sh build-moves` (about 50 MiB: a
# whole build holds every example too, over the device tool's 64 MiB).
moves_only() {
  local ret summary=() rc=0 p t n rel t0 t1 left pt
  only_start moves
  local R=${ret:-$OUT} cap=${MOVES_CAP:-585}
  t0=$(date +%s)
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$R/summary.txt"
  OUT= ISSUE56_LAYOUTS=${MOVES_LAYOUTS:-split16,split40,split48,steer,steer-r48,steer-idle,steer-idle-nobound,mps} ISSUE56_CYCLES=2 ISSUE56_FAST_ROUNDS=1 \
    timeout "${MOVES_STORM:-215}" bash "$ROOT/scripts/gpu-test.sh" issue56 > "$R/i56.txt" 2>&1
  echo "storm: rc=$? $(( $(date +%s) - t0 )) s" >> "$R/summary.txt"
  tar czf "$R/i56.tgz" -C "$BIN" out-issue56 2>/dev/null
  sed -n '/== summary/,$p' "$R/i56.txt" >> "$R/summary.txt"
  t1=$(date +%s)
  growprio_only "$R" > "$R/growprio-summary.txt" 2>&1
  echo "growprio probe: rc=$? $(( $(date +%s) - t1 )) s" >> "$R/summary.txt"
  cat "$R/growprio-summary.txt" >> "$R/summary.txt"
  for pt in ${MOVES_TESTS:-fcsp:100 internal/smpart:40 greenctx:30 tokenbucket:25 examples/gemm:40}; do
    p=${pt%%:*}; t=${pt##*:}; n=${p//\//-}
    local pat=GPU; [ "$p" = examples/gemm ] && pat='GPU|WithoutDevice'
    t1=$(date +%s)
    (cd "$p" && FCSP_PROBE_OUT="$R" timeout "$t" "$ROOT/$BIN/$n.test" -test.v -test.count=1 -test.run "$pat" -test.timeout $((t-5))s) > "$R/t-$n.log" 2>&1
    echo "go test $p (GPU): rc=$? $(( $(date +%s) - t1 )) s, $(grep -c '^--- PASS' "$R/t-$n.log") pass, $(grep -c '^--- FAIL' "$R/t-$n.log") fail, $(grep -c '^--- SKIP' "$R/t-$n.log") skip" >> "$R/summary.txt"
    grep '^--- FAIL' "$R/t-$n.log" >> "$R/summary.txt"
  done
  left=$(( cap - ($(date +%s) - t0) ))
  if [ -x "$BIN/storm-atonce" ] && [ $left -gt 60 ]; then
    t1=$(date +%s)
    OUT= ISSUE56_STORM="$BIN/storm-atonce" ISSUE56_DIR=issue56-atonce ISSUE56_LAYOUTS=${MOVES_ATONCE_LAYOUTS:-split16,split48,steer,steer-r48} \
      ISSUE56_CYCLES=2 ISSUE56_FAST_ROUNDS=1 timeout $(( left - 5 )) bash "$ROOT/scripts/gpu-test.sh" issue56 > "$R/atonce.txt" 2>&1
    echo "growth at once (storm-atonce, the A/B): rc=$? $(( $(date +%s) - t1 )) s" >> "$R/summary.txt"
    tar czf "$R/atonce.tgz" -C "$BIN" out-issue56-atonce 2>/dev/null
    sed -n '/== summary/,$p' "$R/atonce.txt" >> "$R/summary.txt"
    command -v python3 >/dev/null && python3 scripts/storm-ab.py "$BIN/out-issue56" "$BIN/out-issue56-atonce" >> "$R/summary.txt" 2>&1
  fi
  left=$(( cap - ($(date +%s) - t0) ))
  if [ -x "$BIN/fcsp-base.test" ] && [ $left -gt 25 ]; then
    t1=$(date +%s)
    BENCHTIME=200ms timeout $left bash scripts/bench-compare.sh "$ROOT/$BIN/fcsp-base.test" "$ROOT/$BIN/fcsp.test" 3 '^Benchmark(Reshape|NewTenant|NewTenantAlone)$' > "$R/t-bench.log" 2>&1
    echo "bench-compare against fcsp-base.test: rc=$? $(( $(date +%s) - t1 )) s" >> "$R/summary.txt"
    sed -n '/== median/,$p' "$R/t-bench.log" >> "$R/summary.txt"
  fi
  # The device tool returns at most 8 files: the logs go back in one.
  local f logs=()
  for f in "$R"/t-*.log "$R"/i56.txt "$R"/atonce.txt "$R"/growprio*.txt "$R"/growprio.tsv; do
    [ -f "$f" ] && logs+=("${f##*/}")
  done
  [ ${#logs[@]} -gt 0 ] && (cd "$R" && tar czf logs.tgz "${logs[@]}" && rm -f "${logs[@]}")
  cat "$R/summary.txt"
  return $rc
}

# growprio_only builds testdata/probes/growprio.cu with nvcc and runs it
# (GROWPRIO_REPS repetitions, 15) into $1 (or $OUT): growprio.tsv (a row per
# repetition, the summary on # lines, which it prints) and
# growprio-stderr.txt. About 20 s with the build.
growprio_only() {
  local R=${1:-${OUT:-$PWD/$BIN/out}} r
  mkdir -p "$R"
  command -v nvcc >/dev/null || { echo "growprio: no nvcc here"; return 1; }
  nvcc -O2 -arch=sm_90 -o "$BIN/growprio" testdata/probes/growprio.cu -lcuda -lcublas \
    -Xlinker -rpath,/usr/local/cuda/lib64 > "$R/growprio-build.txt" 2>&1 \
    || { echo "growprio: nvcc failed"; cat "$R/growprio-build.txt"; return 1; }
  # As many hardware work queues as the SDK asks for (smpart.WorkQueuesWanted):
  # streams sharing one would queue the class behind the batch whatever the SMs.
  CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-32} timeout 120 "$BIN/growprio" "${GROWPRIO_REPS:-15}" > "$R/growprio.tsv" 2> "$R/growprio-stderr.txt"
  r=$?
  grep '^#' "$R/growprio.tsv"
  [ $r = 0 ] || { echo "growprio: exit $r"; cat "$R/growprio-stderr.txt"; }
  return $r
}

# issue54_only is issue 54's run (about 3 minutes): TestGPUObjectCosts (what
# a stream, event, module and green context hold, the pool's count against
# the driver's), what a cuBLAS handle takes with and without a workspace
# from the quota (memlimit -handle), then examples/memlimit's server under
# WithDeviceMemoryLimit(FCSP_MEMLIMIT_MIB, 4096): workspaces from the quota,
# cuBLAS's own workspaces, and those with the headroom folded in. Output in
# $OUT: objects.log, handle.txt, memlimit*.txt.
issue54_only() {
  local ret summary=() rc=0 r lim=${FCSP_MEMLIMIT_MIB:-4096} dur=${FCSP_MEMLIMIT_DURATION:-10s}
  only_start issue54
  (cd fcsp && "$ROOT/$BIN/fcsp.test" -test.v -test.count=1 -test.run '^TestGPUObjectCosts$' -test.timeout 120s) > "$OUT/objects.log" 2>&1
  r=$?; grep -E 'overhead_gpu_test|^(--- |ok|FAIL|PASS)' "$OUT/objects.log"
  summary+=("TestGPUObjectCosts: $([ $r = 0 ] && echo ok || echo FAILED)"); [ $r = 0 ] || rc=1
  "$BIN/memlimit" -handle -handles 4 > "$OUT/handle.txt" 2>&1
  r=$?; cat "$OUT/handle.txt"
  summary+=("memlimit -handle: $([ $r = 0 ] && echo ok || echo FAILED)"); [ $r = 0 ] || rc=1
  for v in "" "-no-workspace" "-no-workspace -headroom"; do
    local tag=memlimit${v// /}
    "$BIN/memlimit" -limit "$lim" -duration "$dur" -sample 100ms $v > "$OUT/$tag.txt" 2>&1
    r=$?; head -3 "$OUT/$tag.txt"; tail -4 "$OUT/$tag.txt"
    summary+=("memlimit $v: $([ $r = 0 ] && echo ok || echo FAILED)"); [ $r = 0 ] || rc=1
  done
  echo "== summary"; printf '%s\n' "${summary[@]}" | tee "$OUT/summary-issue54.txt"
  [ -n "$ret" ] && cp "$OUT"/*.txt "$OUT"/*.log "$ret/" 2>/dev/null
  return $rc
}

# stall_only is the stalled tenant's run (about 1-2 minutes, as root: MPS):
# examples/storm -stall 2s/2s through scripts/storm-mps.sh, bound 200 ms, in
# FCSP_STALL_ROUNDS (3) rounds, each the sdk variant (a 16-SM tenant's
# spin(SpinForever) beside the interactive class on 16 SMs and the batch on
# the rest in one server process; its report, its refused calls,
# Pool.Shutdown(1 s), the exit and a replacement serving) and the mps
# variant (the same kernel in a client at 12% beside the interactive class
# at 12% and the batch at 88%, the client SIGKILLed after, a new one
# started, the MPS servers recorded). The checks print PASS/FAIL; exit
# non-zero for an error or a functional check failed. Output in $OUT:
# stall.txt, .json, stall-stderr.txt, stall-after.txt (what is left of MPS
# and on the GPU), stall-mps-logs.tgz (the daemon's control and server logs).
stall_only() {
  local ret summary=() rc=0 r
  only_start stall
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
  OUT=$OUT STORM_STALL=${FCSP_STALL:-2s/2s} STORM_ROUNDS=${FCSP_STALL_ROUNDS:-3} STORM_TAG=stall \
    bash scripts/storm-mps.sh "$BIN/storm" > "$OUT/stall-run.txt" 2>&1
  r=$?; sed -n '/^### /,$p' "$OUT/stall-run.txt"; [ $r = 0 ] || tail -5 "$OUT/stall-run.txt"
  summary+=("examples/storm -stall (sdk, mps): $([ $r = 0 ] && echo ok || echo "FAILED (exit $r)")"); [ $r = 0 ] || rc=1
  echo "== summary"; printf '%s\n' "${summary[@]}" | tee "$OUT/summary-stall.txt"
  if [ -n "$ret" ]; then
    cp "$OUT"/gpu.txt "$OUT"/stall.txt "$OUT"/stall.json "$OUT"/stall-stderr.txt "$OUT"/stall-after.txt "$OUT"/summary-stall.txt "$ret/" 2>/dev/null
    tar czf "$ret/stall-mps-logs.tgz" -C "$OUT" mps-logs stall-run.txt 2>/dev/null
  fi
  return $rc
}

sanitize_only() {
  OUT=${OUT:-$PWD/$BIN/out}; mkdir -p "$OUT"
  export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
  local summary=() rc=0
  sanitize_pkgs || rc=1
  echo "== summary"; printf '%s\n' "${summary[@]}" | tee "$OUT/summary-sanitize.txt"
  return $rc
}

# hot_only: issue 19's CPU figures on the GPU host, about 30 s, no GPU used:
# the admission benchmarks (limited beside the clock+CAS floor and the
# unlimited path, 6 rounds) and hotpath's admission table and quota rows.
hot_only() {
  OUT=${OUT:-$PWD/$BIN/out}; mkdir -p "$OUT"
  local rc=0
  (cd tokenbucket && "../$BIN/tokenbucket.test" -test.run '^$' -test.bench 'Clock|Floor|Admission' -test.count 6 -test.benchtime 2000000x) > "$OUT/bench-admission.txt" 2>&1 || rc=1
  grep -E '^Benchmark(AdmissionVsFloor|Floor)|^(ok|FAIL|PASS)' "$OUT/bench-admission.txt"
  "$BIN/hotpath" -md -rounds 6 -g 1,4,16,64 -calls 50000 -admission 1000000 \
    -only 'clock \+ CAS|quota check\+release|HAMi-style check|launch admission|mutex bucket' > "$OUT/hotpath-hot.txt" 2>&1 || rc=1
  grep -E '^- Load|^\| (quota check\+release, leases|tokenbucket launch admission) \| (HAMi|clock)' "$OUT/hotpath-hot.txt"; tail -9 "$OUT/hotpath-hot.txt"
  echo "== hot: $([ $rc = 0 ] && echo ok || echo FAILED) (logs in $OUT/bench-admission.txt, $OUT/hotpath-hot.txt)"
  return $rc
}

case "${1:-all}" in
  sanitize) sanitize_only ;;
  hot) hot_only ;;
  lag) lag_only ;;
  meter) meter_only ;;
  dofast) dofast_only ;;
  bandwidth) bandwidth_only ;;
  clocks) clocks_only ;;
  storm) storm_only ;;
  issue41) issue41_only ;;
  issue56) issue56_only ;;
  moves) moves_only ;;
  growprio) growprio_only ;;
  issue54) issue54_only ;;
  stall) stall_only ;;
  build) build ;;
  build-moves) build_moves ;;
  run) run ;;
  all) build && { command -v nvidia-smi >/dev/null && run || echo "no GPU here: built only"; } ;;
  *) echo "usage: $0 [build|build-moves|run|sanitize|hot|lag|meter|dofast|bandwidth|clocks|storm|issue41|issue56|moves|growprio|issue54|stall]" >&2; exit 2 ;;
esac
