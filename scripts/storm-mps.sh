#!/usr/bin/env bash
# Issue 29's server-storm benchmark in one call on the GPU machine (run as
# root): examples/storm with every layout, MPS included. The binary starts
# and quits the MPS daemon itself around each round's mps layout (through
# -mps-start / -mps-stop, the commands below), so that the in-process
# layouts of the same round never run as MPS clients; this script gives it
# the daemon's directories and makes sure no daemon is left behind.
#
#   bash scripts/storm-mps.sh [STORM_BINARY] [extra storm flags...]   # default .bin/storm; ~7 min
#   STORM_ROUNDS=1 STORM_DURATION=1s bash scripts/storm-mps.sh        # a quicker look (~2 min)
#
# Issue 41 instead of the matrix: STORM_BURST runs the bursty load (-burst)
# in every layout, MPS 12%/88% interleaved with the SM splits and the
# controller in each round, and draws $OUT/$STORM_TAG.svg; STORM_COLDSTART
# adds the cold start (-coldstart: 16 request goroutines on a fresh tenant,
# WithWarmup against no warm-up and DoEach). Output $OUT/$STORM_TAG.txt,
# .json, .svg (STORM_TAG: issue41).
#
#   STORM_BURST=3s/1s STORM_CYCLES=4 STORM_COLDSTART=1s/2s bash scripts/storm-mps.sh       # ~6 min
#   STORM_BURST=300ms/100ms STORM_CYCLES=10 STORM_TAG=issue41-fast bash scripts/storm-mps.sh # ~2 min
#
# STORM_STALL (before/during, e.g. 2s/2s) runs the stalled tenant instead
# (-stall): a 16-SM tenant's kernel that never ends beside the two classes
# in a server process that then shuts down, exits and is replaced (sdk),
# and the same kernel in an MPS client that is then SIGKILLed (mps),
# STORM_ROUNDS (3) interleaved rounds, bound STORM_STALL_BOUND (200ms).
# After it: what is left of MPS and on the GPU ($OUT/$STORM_TAG-after.txt)
# and the MPS daemon's logs ($OUT/mps-logs/). STORM_TAG: stall. ~1-2 min.
#
#   STORM_STALL=2s/2s bash scripts/storm-mps.sh
set -uo pipefail
cd "$(dirname "$0")/.."
STORM=${1:-.bin/storm}; shift || true
CUBLAS=${STORM_CUBLAS:-/usr/local/cuda/lib64/libcublas.so.13}
OUTDIR=${OUT:-.bin/out}; mkdir -p "$OUTDIR"
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
export CUDA_MPS_PIPE_DIRECTORY=/tmp/fcsp-mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/fcsp-mps/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"

quit_mps() { echo quit | nvidia-cuda-mps-control >/dev/null 2>&1 || true; }
trap quit_mps EXIT
quit_mps # a daemon left by an earlier run would make every layout an MPS client
sleep 1

MPS=(-mps-start 'nvidia-cuda-mps-control -d' -mps-stop 'echo quit | nvidia-cuda-mps-control')
if [ -n "${STORM_STALL:-}" ]; then
  TAG=${STORM_TAG:-stall}
  rm -f "$CUDA_MPS_LOG_DIRECTORY"/*.log # this run's log only
  # The MPS servers and each one's clients, recorded around the SIGKILL.
  QUERY='for s in $(echo get_server_list | nvidia-cuda-mps-control); do echo "server $s clients: $(echo get_client_list $s | nvidia-cuda-mps-control | tr "\n" " ")"; done'
  "$STORM" -cublas "$CUBLAS" -stall "$STORM_STALL" -stall-bound "${STORM_STALL_BOUND:-200ms}" -stall-variants "${STORM_STALL_VARIANTS:-sdk,mps}" \
    -rounds "${STORM_ROUNDS:-3}" -warmup "${STORM_WARMUP:-300ms}" "${MPS[@]}" -mps-query "$QUERY" \
    -json "$OUTDIR/$TAG.json" "$@" 2> "$OUTDIR/$TAG-stderr.txt" | tee "$OUTDIR/$TAG.txt"
  rc=${PIPESTATUS[0]}
  [ -s "$OUTDIR/$TAG-stderr.txt" ] && { echo "== stderr (last 20 lines)"; tail -20 "$OUTDIR/$TAG-stderr.txt"; }
  # MPS left clean? The daemon was quit after each mps variant; quit once
  # more, then record what is left of it and on the GPU.
  quit_mps; sleep 1
  { echo "== MPS processes after the run (none expected)"; pgrep -a nvidia-cuda-mps || echo "none"
    echo "== GPU compute processes after the run (none expected)"
    apps=$(nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader 2>&1); echo "${apps:-none}"
    echo "== GPU utilisation after the run"; nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader 2>&1; } | tee "$OUTDIR/$TAG-after.txt"
  mkdir -p "$OUTDIR/mps-logs" && cp "$CUDA_MPS_LOG_DIRECTORY"/*.log "$OUTDIR/mps-logs/" 2>/dev/null
  exit "$rc"
fi
if [ -n "${STORM_BURST:-}${STORM_COLDSTART:-}" ]; then
  TAG=${STORM_TAG:-issue41}
  ARGS=()
  [ -n "${STORM_BURST:-}" ] && ARGS+=(-burst "$STORM_BURST" -cycles "${STORM_CYCLES:-4}" -target "${STORM_TARGET:-300us}"
    -burst-layouts "${STORM_LAYOUTS:-split16,split32,split48,steer,mps}" -chart "$OUTDIR/$TAG.svg")
  [ -n "${STORM_COLDSTART:-}" ] && ARGS+=(-coldstart "$STORM_COLDSTART")
  "$STORM" -cublas "$CUBLAS" "${ARGS[@]}" -rounds "${STORM_ROUNDS:-2}" -warmup "${STORM_WARMUP:-300ms}" "${MPS[@]}" \
    -json "$OUTDIR/$TAG.json" "$@" 2> "$OUTDIR/$TAG-stderr.txt" | tee "$OUTDIR/$TAG.txt"
  rc=${PIPESTATUS[0]}
  [ -s "$OUTDIR/$TAG-stderr.txt" ] && { echo "== stderr (last 20 lines)"; tail -20 "$OUTDIR/$TAG-stderr.txt"; }
  exit "$rc"
fi

"$STORM" -cublas "$CUBLAS" -layouts "${STORM_LAYOUTS:-alone,partitioned,shared,mps}" \
  -rounds "${STORM_ROUNDS:-3}" -duration "${STORM_DURATION:-2s}" -warmup "${STORM_WARMUP:-300ms}" \
  "${MPS[@]}" -json "$OUTDIR/storm.json" "$@" 2> "$OUTDIR/storm-stderr.txt" | tee "$OUTDIR/storm.txt"
rc=${PIPESTATUS[0]}
[ -s "$OUTDIR/storm-stderr.txt" ] && { echo "== stderr (last 20 lines)"; tail -20 "$OUTDIR/storm-stderr.txt"; }
exit "$rc"
