#!/usr/bin/env bash
# Builds helm v3.22.0 from this Go module (go.mod's `tool` line) into OUT
# (default: $CARGO_TARGET_DIR/helm/bin, or target/helm/bin), unless it is already there for the same
# go.mod, go.sum and build.sh. The chart tests (tests/helm.rs) run it
# against the control plane of tests/apiserver/. About 6 minutes with cold
# Go caches on 2 cores; 11 s once they are warm.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-${CARGO_TARGET_DIR:-$here/../../target}/helm/bin}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
stamp="$(cat "$here/go.mod" "$here/go.sum" "$here/build.sh" | sha256sum | cut -c1-16)"
if [ -f "$out/.stamp" ] && [ "$(cat "$out/.stamp")" = "$stamp" ] && [ -x "$out/helm" ]; then
  exit 0
fi
command -v go >/dev/null 2>&1 || { echo "build.sh: go not found on PATH" >&2; exit 3; }
# The flags of helm's own Makefile: its version, and the Kubernetes version
# that `helm lint` and `helm template` assume without a cluster (the
# client-go minor of go.mod, v0.37 -> 1.37).
V="-X helm.sh/helm/v3/internal/version.version=v3.22.0 -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
V="$V -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=37"
V="$V -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37"
cd "$here"
CGO_ENABLED=0 go build -trimpath -ldflags "$V" -o "$out/helm" helm.sh/helm/v3/cmd/helm
echo "$stamp" > "$out/.stamp"
