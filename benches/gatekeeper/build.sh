#!/usr/bin/env bash
# Builds OPA Gatekeeper v3.23.1 from this Go module (go.mod's `tool` line;
# Gatekeeper's own go.mod has no replaces, so none are needed here) into OUT
# (default: $CARGO_TARGET_DIR/gatekeeper/bin, or target/gatekeeper/bin),
# unless it is already there for the same go.mod and go.sum. The
# latency benchmark (benches/admission_latency.rs) runs it out of cluster
# beside winadmit and Kyverno. About 12 minutes on 2 cores shared with other
# builds (4 minutes of CPU), 1.6 GB peak; a 110 MB binary.
set -euo pipefail
here="$(dirname "$0")"
exec "$here/../../tests/go-build.sh" "$here" \
  "${1:-${CARGO_TARGET_DIR:-$here/../../target}/gatekeeper/bin}" gatekeeper github.com/open-policy-agent/gatekeeper/v3
