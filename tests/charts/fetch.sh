#!/usr/bin/env bash
# Downloads the modules that hold the real charts and overlays lint is
# tested on (tests/lint_report/charts.rs), through the Go module proxy
# (`go mod download` into the module cache; nothing is built), and prints
# one line per module: NAME=DIR.
#   kyverno         github.com/kyverno/kyverno v1.19.1: charts/kyverno
#   kyverno-api     github.com/kyverno/api (the version kyverno v1.19.1's go.mod names): charts/kyverno-api, a subchart of kyverno's
#   openreports     github.com/openreports/reports-api v0.2.1: charts/openreports, a subchart of kyverno's
#   gatekeeper      github.com/open-policy-agent/gatekeeper/v3 v3.23.1: charts/gatekeeper
#   kwok            sigs.k8s.io/kwok v0.8.0: charts/kwok, kustomize/kwok
# (kyverno's third subchart, reports-server, is in no Go module: the test
# gives it a stub.) .ci/run runs it before the tests. Exits 3 when go is
# not on PATH.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
command -v go >/dev/null 2>&1 || { echo "fetch.sh: go not found on PATH" >&2; exit 3; }
dir() {
  (cd "$here" && go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
}
check() {
  [ -e "$2/$3" ] || { echo "fetch.sh: no $3 in $1 ($2)" >&2; exit 1; }
}
kyverno="$(dir github.com/kyverno/kyverno@v1.19.1)"
check kyverno "$kyverno" charts/kyverno/Chart.yaml
api_version="$(sed -n 's/^[[:space:]]*github.com\/kyverno\/api \(v[^ ]*\).*/\1/p' "$kyverno/go.mod")"
api="$(dir "github.com/kyverno/api@$api_version")"
check kyverno-api "$api" charts/kyverno-api/Chart.yaml
openreports="$(dir github.com/openreports/reports-api@v0.2.1)"
check openreports "$openreports" charts/openreports/Chart.yaml
gatekeeper="$(dir github.com/open-policy-agent/gatekeeper/v3@v3.23.1)"
check gatekeeper "$gatekeeper" charts/gatekeeper/Chart.yaml
kwok="$(dir sigs.k8s.io/kwok@v0.8.0)"
check kwok "$kwok" charts/kwok/Chart.yaml
check kwok "$kwok" kustomize/kwok/kustomization.yaml
printf 'kyverno=%s\nkyverno-api=%s\nopenreports=%s\ngatekeeper=%s\nkwok=%s\n' \
  "$kyverno" "$api" "$openreports" "$gatekeeper" "$kwok"
