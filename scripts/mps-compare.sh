#!/usr/bin/env bash
# MPS beside fcsp partitions, in one call on the GPU machine (run as root):
# starts the MPS daemon, runs examples/gemm's two sides as two processes at
# 12% / 88% active threads for the same time, prints both figures, quits the
# daemon, then runs our partitioned modes (and the shared baseline) in the
# same call for the side-by-side table.
#
#   bash scripts/mps-compare.sh [GEMM_BINARY] [DURATION]   # default .bin/gemm 10s
set -uo pipefail
cd "$(dirname "$0")/.."
GEMM=${1:-.bin/gemm}
DUR=${2:-10s}
CUBLAS=${GEMM_CUBLAS:-/usr/local/cuda/lib64/libcublas.so.13}
OUTDIR=${OUT:-.bin/out}; mkdir -p "$OUTDIR"
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
export CUDA_MPS_PIPE_DIRECTORY=/tmp/fcsp-mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/fcsp-mps/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"

quit_mps() { echo quit | nvidia-cuda-mps-control >/dev/null 2>&1 || true; }
trap quit_mps EXIT

echo "== MPS: interactive at 12%, batch at 88%, $DUR each, concurrently"
nvidia-cuda-mps-control -d || { echo "could not start the MPS daemon"; exit 1; }
sleep 1
CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=88 "$GEMM" -cublas "$CUBLAS" -mps-role batch -duration "$DUR" > "$OUTDIR/mps-batch.txt" 2>&1 &
bpid=$!
sleep 2 # the batch side is running before the interactive side measures
CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=12 "$GEMM" -cublas "$CUBLAS" -mps-role interactive -duration "$DUR" > "$OUTDIR/mps-interactive.txt" 2>&1
irc=$?
wait $bpid; brc=$?
quit_mps
sleep 1
echo "MPS interactive (12%): $(grep '^{' "$OUTDIR/mps-interactive.txt" || tail -3 "$OUTDIR/mps-interactive.txt")"
echo "MPS batch (88%):       $(grep '^{' "$OUTDIR/mps-batch.txt" || tail -3 "$OUTDIR/mps-batch.txt")"

echo "== fcsp in one process: shared baseline and partitions, $DUR each"
"$GEMM" -cublas "$CUBLAS" -modes alone,shared,part16,part8 -rounds "${GEMM_ROUNDS:-1}" -duration "$DUR" -json "$OUTDIR/gemm-vs-mps.json" | tee "$OUTDIR/gemm-vs-mps.txt"
frc=${PIPESTATUS[0]}

echo "== side by side (interactive P99 us, batch TFLOP/s)"
python3 - "$OUTDIR" <<'PY' || true
import json, sys, os
d = sys.argv[1]
def line(path):
    for l in open(os.path.join(d, path)):
        if l.startswith("{"):
            return json.loads(l)
    return {}
i, b = line("mps-interactive.txt"), line("mps-batch.txt")
print(f"{'MPS 12%/88%':24s} P99 {i.get('p99_us', float('nan')):8.1f}   batch {b.get('batch_tflops', float('nan')):7.1f}")
for m in json.load(open(os.path.join(d, "gemm-vs-mps.json")))["modes"]:
    print(f"{'fcsp ' + m['mode']:24s} P99 {m['p99_us']:8.1f}   batch {m.get('batch_tflops', 0):7.1f}")
PY
[ $irc = 0 ] && [ $brc = 0 ] && [ $frc = 0 ]
