#!/usr/bin/env bash
# Builds Kyverno v1.19.1 from this Go module (go.mod's `tool` lines, with the
# one replace Kyverno's own go.mod carries) into OUT (default:
# $CARGO_TARGET_DIR/kyverno/bin, or target/kyverno/bin), unless it is
# already there for the same go.mod and go.sum: `kyverno` (the admission
# controller; the latency benchmark, benches/admission_latency.rs, runs it
# out of cluster beside winadmit) and `reports-controller` (its background
# scan; benches/audit_scale.rs --kwok-kyverno runs it beside `winadmit
# audit`). About 7 minutes with cold Go caches on 2 cores, 2.9 GB peak.
set -euo pipefail
here="$(dirname "$0")"
exec "$here/../../tests/go-build.sh" "$here" \
  "${1:-${CARGO_TARGET_DIR:-$here/../../target}/kyverno/bin}" \
  kyverno github.com/kyverno/kyverno/cmd/kyverno \
  reports-controller github.com/kyverno/kyverno/cmd/reports-controller
