#!/usr/bin/env bash
# Validates the manifests offline, in strict mode (unknown fields fail),
# against the JSON schemas in deploy/schemas: server.yaml against
# Kubernetes 1.30.14's, server-dra.yaml (resource.k8s.io/v1, GA in 1.34)
# against 1.34.4's. No schema is fetched and no kind is skipped: a kind
# without a schema there fails. Then it checks that the check can fail (a
# misspelt field in each file must be refused) and that each file marks
# one object for Prometheus scraping (the pods), not two.
set -euo pipefail
cd "$(dirname "$0")/.."
KUBECONFORM_VERSION=v0.7.0
if ! command -v kubeconform >/dev/null; then
  GOBIN="${GOBIN:-$(go env GOPATH)/bin}"
  go install "github.com/yannh/kubeconform/cmd/kubeconform@$KUBECONFORM_VERSION"
  PATH="$GOBIN:$PATH"
fi
kc() { # kc K8S_VERSION FILE...
  local v=$1; shift
  kubeconform -strict -summary -kubernetes-version "$v" \
    -schema-location 'deploy/schemas/{{ .NormalizedKubernetesVersion }}-standalone{{ .StrictSuffix }}/{{ .ResourceKind }}{{ .KindSuffix }}.json' "$@"
}
declare -A version=([deploy/server.yaml]=1.30.14 [deploy/server-dra.yaml]=1.34.4)
for f in deploy/*.yaml; do
  [ -n "${version[$f]:-}" ] || { echo "deploy/check.sh: $f: no Kubernetes version to check it against (add it to check.sh)" >&2; exit 1; }
done
bad=$(mktemp --suffix=.yaml); trap 'rm -f "$bad"' EXIT
for f in "${!version[@]}"; do
  kc "${version[$f]}" "$f"
  for typo in 's/containerPort:/containerPrt:/' 's/deviceClassName:/deviceClassNam:/'; do
    sed "$typo" "$f" > "$bad"
    cmp -s "$f" "$bad" && continue   # the field is not in this file
    if kc "${version[$f]}" "$bad" >/dev/null 2>&1; then
      echo "deploy/check.sh: $f with '$typo' passed: the schemas check nothing" >&2
      exit 1
    fi
  done
  n=$(grep -c 'prometheus.io/scrape:' "$f" || true)
  if [ "$n" != 1 ]; then
    echo "deploy/check.sh: $f marks $n objects for scraping; want 1 (the pod template), or every series is scraped twice" >&2
    exit 1
  fi
done
echo "deploy/check.sh: manifests valid; misspelt fields are refused; one object per file is scraped"
