#!/usr/bin/env bash
# Fetches the report CRDs from their projects through the Go module proxy
# (`go mod download` into the module cache) and copies them into OUT
# (default: charts/winadmit/files/crds):
#   openreports.io/v1alpha1: github.com/openreports/reports-api v0.2.1, config/crd/
#   wgpolicyk8s.io/v1alpha2: github.com/kyverno/kyverno v1.19.1, config/crds/policyreport/
# tests/lint_report/audit_crds.rs runs it into a scratch folder and compares with the
# chart's copies. Exits 3 when go is not on PATH.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/../../charts/winadmit/files/crds}"
command -v go >/dev/null 2>&1 || { echo "fetch.sh: go not found on PATH" >&2; exit 3; }
mkdir -p "$out"
dir() {
  (cd "$here" && go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
}
reports="$(dir github.com/openreports/reports-api@v0.2.1)"
kyverno="$(dir github.com/kyverno/kyverno@v1.19.1)"
[ -d "$reports/config/crd" ] || { echo "fetch.sh: no config/crd in reports-api v0.2.1 ($reports)" >&2; exit 1; }
[ -d "$kyverno/config/crds/policyreport" ] || { echo "fetch.sh: no config/crds/policyreport in kyverno v1.19.1 ($kyverno)" >&2; exit 1; }
for f in openreports.io_reports.yaml openreports.io_clusterreports.yaml; do
  install -m 0644 "$reports/config/crd/$f" "$out/$f"
done
for f in wgpolicyk8s.io_policyreports.yaml wgpolicyk8s.io_clusterpolicyreports.yaml; do
  install -m 0644 "$kyverno/config/crds/policyreport/$f" "$out/$f"
done
