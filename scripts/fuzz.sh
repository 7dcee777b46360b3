#!/usr/bin/env bash
# Runs every fuzz target of a reader of outside input for FUZZTIME each
# (default 6s), one after another: CI runs them briefly so that a
# regression the seeds miss is likely caught; a long run (FUZZTIME=10m,
# under nice) is how the executions in docs/BENCHMARKS.md were counted.
# A failing input is written under the package's testdata/fuzz, to commit
# with the fix. Usage: scripts/fuzz.sh [target-regexp]
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${FUZZTIME:-6s}"
only="${1:-.}"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
# package target: each reader of outside input.
targets=(
  "./internal/ptxsig FuzzParse"            # PTX a server hands LoadModule
  "./internal/environ FuzzEnv"             # the environment and WithEnviron's list
  "./internal/hamienv FuzzParse"           # HAMi-core's variables
  "./internal/hamienv FuzzParseMemory"
  "./internal/hamienv FuzzParseSMLimit"
  "./internal/hamienv FuzzParseSharedCache"
  "./internal/bytesize FuzzFormat"         # byte sizes in messages
  "./stream FuzzParse"                     # stream class names
  "./examples/server FuzzRequestBody"      # the server's request body
  "./examples/server FuzzConfigFile"       # the server's -config file
)
for t in "${targets[@]}"; do
  read -r pkg name <<<"$t"
  [[ "$pkg $name" =~ $only ]] || continue
  echo "== $name ($pkg, $fuzztime)"
  if ! go test -run '^$' -fuzz "^$name\$" -fuzztime "$fuzztime" -parallel "${FUZZPARALLEL:-2}" "$pkg" >"$log" 2>&1; then
    cat "$log"
    exit 1
  fi
  grep -E '^fuzz: elapsed' "$log" | tail -n 1
done
