#!/usr/bin/env bash
# Runs the launch, Do and allocation benchmarks of two fcsp test binaries in
# interleaved rounds on one machine, so that "no slower than before" is a
# same-run comparison:
#
#   scripts/bench-compare.sh OLD.test NEW.test [rounds] [regexp]
#
# On the GPU machine: build the old binary at the earlier commit (go test -c
# ./fcsp), carry both, run this there. Prints each round's lines, prefixed
# old/new; the summary (median per benchmark, new/old) comes last.
set -uo pipefail
old=$1 new=$2 rounds=${3:-3}
re=${4:-'^Benchmark(Do|Launch|Alloc|PoolAlloc)$'}
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
out=$(mktemp)
for r in $(seq "$rounds"); do
  for which in old new; do
    bin=$old; [ $which = new ] && bin=$new
    (cd "$(dirname "$0")/../fcsp" && "$bin" -test.run '^$' -test.bench "$re" -test.benchtime "${BENCHTIME:-1s}") 2>&1 |
      grep -E '^Benchmark' | sed "s/^/$which /" | tee -a "$out"
  done
done
echo "== median ns/op per benchmark over $rounds rounds: old, new, new/old"
awk '{ k=$2; v=$4; if ($1=="old") o[k]=o[k]" "v; else n[k]=n[k]" "v; keys[k]=1 }
  function med(s,  a, m, i, j, t) { m=split(s, a, " "); for (i=1;i<=m;i++) for (j=i+1;j<=m;j++) if (a[j]+0<a[i]+0) {t=a[i];a[i]=a[j];a[j]=t}; return m ? a[int((m+1)/2)] : "" }
  END { for (k in keys) { mo=med(o[k]); mn=med(n[k]); printf "%-60s %10s %10s %6s\n", k, mo, mn, (mo>0 && mn>0) ? sprintf("%.2f", mn/mo) : "-" } }' "$out" | sort
rm -f "$out"
