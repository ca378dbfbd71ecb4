#!/usr/bin/env bash
# Builds KWOK v0.8.0 (simulated kubelets for the scheduling cluster of
# tests/support/scheduling.rs) from this Go module (go.mod's `tool` line)
# into OUT (default: $CARGO_TARGET_DIR/controlplane/kwok, or
# target/controlplane/kwok), unless it is already there (tests/go-build.sh),
# and copies KWOK's stage configuration (node-initialize, pod-ready,
# pod-complete, pod-delete from its kustomize/stage/ folder) beside it as
# stages.yaml. A module of its own: KWOK requires k8s.io v0.36, which must
# not be forced onto the control plane's module (tests/apiserver/). About
# 1.5 minutes with the control plane's Go caches warm.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-${CARGO_TARGET_DIR:-$here/../../target}/controlplane/kwok}"
"$here/../go-build.sh" "$here" "$out" kwok sigs.k8s.io/kwok/cmd/kwok
stages="$(cd "$here" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage"
tmp="$out/stages.yaml.tmp"
: > "$tmp"
for f in node/fast/node-initialize pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete; do
  printf -- '---\n' >> "$tmp"
  cat "$stages/$f.yaml" >> "$tmp"
  printf '\n' >> "$tmp"
done
mv "$tmp" "$out/stages.yaml"
