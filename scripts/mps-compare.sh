#!/usr/bin/env bash
# MPS beside fcsp partitions, in one call on the GPU machine (run as root):
# starts the MPS daemon, runs examples/gemm's two sides as two processes at
# 12% / 88% active threads for the same time, prints both figures, quits the
# daemon, then runs our partitioned modes (and the shared baseline) in the
# same call for the side-by-side table.
#
#   GEMM_ROUNDS=3 bash scripts/mps-compare.sh [GEMM_BINARY] [DURATION]   # default 1 round, .bin/gemm 10s
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

ROUNDS=${GEMM_ROUNDS:-1}
# Rounds interleave the two: MPS, then ours, then MPS again..., so that
# both sides meet the same drift of clocks and temperature over the call.
for r in $(seq 1 "$ROUNDS"); do
  echo "== round $r: MPS, interactive at 12%, batch at 88%, $DUR each, concurrently"
  nvidia-cuda-mps-control -d || { echo "could not start the MPS daemon"; exit 1; }
  sleep 1
  CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=88 "$GEMM" -cublas "$CUBLAS" -mps-role batch -duration "$DUR" > "$OUTDIR/mps-batch-$r.txt" 2>&1 &
  bpid=$!
  sleep 2 # the batch side is running before the interactive side measures
  CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=12 "$GEMM" -cublas "$CUBLAS" -mps-role interactive -duration "$DUR" > "$OUTDIR/mps-interactive-$r.txt" 2>&1
  irc=$?
  wait $bpid; brc=$?
  quit_mps
  sleep 1
  echo "MPS interactive (12%): $(grep '^{' "$OUTDIR/mps-interactive-$r.txt" || tail -3 "$OUTDIR/mps-interactive-$r.txt")"
  echo "MPS batch (88%):       $(grep '^{' "$OUTDIR/mps-batch-$r.txt" || tail -3 "$OUTDIR/mps-batch-$r.txt")"
  [ $irc = 0 ] && [ $brc = 0 ] || { echo "MPS side failed in round $r"; exit 1; }
  echo "== round $r: fcsp in one process, alone on 16 SMs and 16 SMs + the rest, $DUR each"
  "$GEMM" -cublas "$CUBLAS" -modes alone,part16 -duration "$DUR" -json "$OUTDIR/gemm-round-$r.json" || exit 1
done
echo "== fcsp: the shared baseline and 8 SMs + the rest, $DUR each"
"$GEMM" -cublas "$CUBLAS" -modes shared,part8 -duration "$DUR" -json "$OUTDIR/gemm-vs-mps.json" | tee "$OUTDIR/gemm-vs-mps.txt"
frc=${PIPESTATUS[0]}

echo "== side by side, per round (interactive P99 us, batch TFLOP/s)"
python3 - "$OUTDIR" "$ROUNDS" <<'PY' || true
import json, sys, os, statistics as st
d, n = sys.argv[1], int(sys.argv[2])
def line(path):
    for l in open(os.path.join(d, path)):
        if l.startswith("{"):
            return json.loads(l)
    return {}
rows = []
for r in range(1, n + 1):
    i, b = line(f"mps-interactive-{r}.txt"), line(f"mps-batch-{r}.txt")
    m = {x["mode"]: x for x in json.load(open(os.path.join(d, f"gemm-round-{r}.json")))["modes"]}
    row = (i.get("p99_us", float("nan")), b.get("batch_tflops", float("nan")), m["part16"]["p99_us"], m["part16"].get("batch_tflops", 0), m["alone"]["p99_us"])
    rows.append(row)
    print(f"round {r}: MPS P99 {row[0]:7.1f} TF {row[1]:6.1f} | fcsp 16+rest P99 {row[2]:7.1f} TF {row[3]:6.1f} | ahead: P99 {row[2] < row[0]}, TF {row[3] >= row[1]} | fcsp alone-on-16 P99 {row[4]:7.1f} ratio {row[2]/row[4]:.2f}")
med = [st.median(c) for c in zip(*rows)]
print(f"median : MPS P99 {med[0]:7.1f} TF {med[1]:6.1f} | fcsp 16+rest P99 {med[2]:7.1f} TF {med[3]:6.1f} | P99/alone median {st.median(r[2]/r[4] for r in rows):.2f}")
for x in json.load(open(os.path.join(d, "gemm-vs-mps.json")))["modes"]:
    print(f"{'fcsp ' + x['mode']:24s} P99 {x['p99_us']:8.1f}   batch {x.get('batch_tflops', 0):7.1f}")
PY
[ $frc = 0 ]
