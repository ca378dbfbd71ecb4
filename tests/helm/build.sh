#!/usr/bin/env bash
# Builds helm v3.22.0 from this Go module (go.mod's `tool` line) into OUT
# (default: $CARGO_TARGET_DIR/helm/bin, or target/helm/bin), unless it is
# already there (tests/go-build.sh). The chart tests (tests/install/helm.rs) run it
# against the control plane of tests/apiserver/. About 6 minutes with cold
# Go caches on 2 cores; 11 s once they are warm.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# The flags of helm's own Makefile: its version, and the Kubernetes version
# that `helm lint` and `helm template` assume without a cluster (the
# client-go minor of go.mod, v0.37 -> 1.37).
V="-X helm.sh/helm/v3/internal/version.version=v3.22.0 -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
V="$V -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=37"
V="$V -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37"
GO_LDFLAGS="$V" exec "$here/../go-build.sh" "$here" \
  "${1:-${CARGO_TARGET_DIR:-$here/../../target}/helm/bin}" helm helm.sh/helm/v3/cmd/helm
