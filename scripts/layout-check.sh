#!/usr/bin/env bash
# What the package layout promises (docs/ARCHITECTURE.md quotes each rule),
# checked: production (package fcsp) links neither the fake driver nor the
# demo kernels; examples import no internal package of the module but their
# own; no public package's API names an internal type; every package has a
# floor in docs/ARCHITECTURE.md and imports nothing from a floor above it.
# Run by .ci/run.
set -uo pipefail
cd "$(dirname "$0")/.."
mod=github.com/fcsp-go/fcsp-go
bad=0
if deps=$(go list -deps ./fcsp | grep -E "^$mod/(internal/cuda/fake|kernels|fcsptest)$"); then
  echo "package fcsp links test support: $deps"; bad=1
fi
# Direct imports (fcsp itself imports internal packages, of course). The
# examples' own internal packages (examples/internal/cublas, gemmjob) are
# not under $mod/internal; no exception is left (examples/day94 draws its
# chart as SVG with the standard library).
if deps=$(go list -f '{{.ImportPath}}: {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./examples/... |
    tr ' ' '\n' | grep "^$mod/internal/" | sort -u); then
  echo "examples import internal packages (use the public API, or examples/internal): $deps"; bad=1
fi
for p in $(go list ./... | grep -v -E "/internal(/|$)|/examples(/|$)"); do
  # The names by which this package refers to internal packages: the last
  # element of each internal import path (no internal package shares its
  # name with a public one, checked below, so the name says which is meant).
  names=$(go list -f '{{join .Imports "\n"}}' "$p" | grep "^$mod/internal/" | sed 's|.*/||' | sort -u | paste -sd'|')
  [ -n "$names" ] || continue
  # CUDAError and Result stay aliases of the binding's error types (fcsp's
  # doc says how to use them), so that driver errors match without
  # conversion; sentinels are re-exported in var blocks (Err... = pkg.Err...).
  if sigs=$(go doc -all "$p" | grep -v -E '^\s+Err[A-Za-z]* +=|^type (CUDAError|Result) = cuda\.' | grep -E "^(func|type|	[A-Z]|var|const).*[^A-Za-z]($names)\.[A-Z]"); then
    echo "public package $p names internal types:"; echo "$sigs"; bad=1
  fi
done
# Two packages of one name must be told apart by path (internal/smpart was
# internal/greenctx, beside the public greenctx): an internal package is
# named unlike every public one.
public=$(go list -f '{{.ImportPath}} {{.Name}}' ./... | grep -v -E '/(internal|examples)(/| )' | cut -d' ' -f2 | grep -v -x main | sort -u)
if same=$(comm -12 <(echo "$public") <(go list -f '{{.Name}}' ./internal/... | sort -u) | grep .); then
  echo "internal packages named as a public package is (rename the internal one): $same"; bad=1
fi
# The engines live in internal packages that never import the public face.
if deps=$(go list -f '{{.ImportPath}}: {{join .Imports " "}}' ./internal/... | grep -E " $mod/fcsp( |$)"); then
  echo "internal packages import fcsp (the engines must not know the face): $deps"; bad=1
fi
# One file says every option, one every sentinel.
if opts=$(grep -ln '^func With' fcsp/*.go | grep -v -E '_test\.go$|^fcsp/options\.go$'); then
  echo "fcsp options defined outside fcsp/options.go: $opts"; bad=1
fi
if errs=$(grep -n -E '^(var )?\s*Err[A-Z][A-Za-z]* +=' fcsp/*.go | grep -v -E '_test\.go:|^fcsp/errors\.go:'); then
  echo "fcsp sentinels defined outside fcsp/errors.go: $errs"; bad=1
fi
# fcsp calls the CUDA driver only where the pool is opened (pool.go's
# Open); the rest of it talks to the engines (internal/devmem, event,
# greenctx, hostwait, ...), which make the calls.
drvOpenFile=fcsp/pool.go
if calls=$(grep -lE '\b(drv|raw|driver)\.[A-Z][A-Za-z0-9]*\(' fcsp/*.go | grep -v -E '_test\.go$' | grep -v -x -F "$drvOpenFile"); then
  echo "fcsp files that call the driver outside $drvOpenFile (move the call into an engine): $calls"; bad=1
fi
# The face asks a placement for a capability (internal/place's functions),
# never asserts which placement it holds.
if asserts=$(grep -nE '\.\(place\.[A-Z][A-Za-z]*\)' fcsp/*.go | grep -v -E '_test\.go:'); then
  echo "fcsp asserts a concrete placement type (ask internal/place for the capability): $asserts"; bad=1
fi
# The floors (docs/ARCHITECTURE.md): every package has a row there with its
# floor, 1 (the face) to 5 (binding and base), or 0 (tools); a package
# imports nothing from a floor above its own, and only tools import tools.
declare -A floor
while read -r p f; do floor[$p]=$f; done < <(grep -E '^\| `[^`]+` \| [0-5] \|' docs/ARCHITECTURE.md |
  awk -F'|' '{gsub(/[ `]/, "", $2); gsub(/ /, "", $3); print $2, $3}')
if missing=$(go list -f '{{.ImportPath}}' ./... | sed "s|^$mod/||" | while read -r p; do
    [ -n "${floor[$p]:-}" ] || echo "$p"; done | grep .); then
  echo "packages docs/ARCHITECTURE.md does not name (give each a row and a floor): $missing"; bad=1
fi
if up=$(go list -f '{{.ImportPath}} {{join .Imports " "}}' ./... | sed "s|$mod/||g" | while read -r p imports; do
    f=${floor[$p]:-}; [ -n "$f" ] && [ "$f" != 0 ] || continue
    for i in $imports; do
      g=${floor[$i]:-}; [ -n "$g" ] || continue # not the module's
      if [ "$g" = 0 ] || [ "$g" -lt "$f" ]; then echo "$p (floor $f) imports $i (floor $g)"; fi
    done
  done | grep .); then
  echo "imports from a floor above the importer's (docs/ARCHITECTURE.md): $up"; bad=1
fi
[ $bad = 0 ] && echo "layout ok"
exit $bad
