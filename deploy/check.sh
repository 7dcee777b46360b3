#!/usr/bin/env bash
# Validates deploy/*.yaml offline against the Kubernetes 1.30 schemas in
# deploy/schemas (strict: unknown fields fail), then checks that the check
# can fail: a copy with a misspelt field must be refused.
set -euo pipefail
cd "$(dirname "$0")/.."
KUBECONFORM_VERSION=v0.7.0
K8S=1.30.14
if ! command -v kubeconform >/dev/null; then
  GOBIN="${GOBIN:-$(go env GOPATH)/bin}"
  go install "github.com/yannh/kubeconform/cmd/kubeconform@$KUBECONFORM_VERSION"
  PATH="$GOBIN:$PATH"
fi
kc() {
  kubeconform -strict -summary -kubernetes-version "$K8S" \
    -schema-location 'deploy/schemas/{{ .NormalizedKubernetesVersion }}-standalone{{ .StrictSuffix }}/{{ .ResourceKind }}{{ .KindSuffix }}.json' "$@"
}
kc deploy/*.yaml
bad=$(mktemp --suffix=.yaml); trap 'rm -f "$bad"' EXIT
sed 's/containerPort:/containerPrt:/' deploy/server.yaml > "$bad"
if kc "$bad" >/dev/null 2>&1; then
  echo "deploy/check.sh: a misspelt field passed: the schemas check nothing" >&2
  exit 1
fi
echo "deploy/check.sh: manifests valid; a misspelt field is refused"
