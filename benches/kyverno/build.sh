#!/usr/bin/env bash
# Builds Kyverno v1.19.1 from this Go module (go.mod's `tool` line, with the
# one replace Kyverno's own go.mod carries) into OUT (default:
# $CARGO_TARGET_DIR/kyverno/bin, or target/kyverno/bin), unless it is
# already there for the same go.mod, go.sum and build.sh. The latency
# benchmark (benches/admission_latency.rs) runs it out of cluster beside
# winadmit. About 7 minutes with cold Go caches on 2 cores, 2.9 GB peak.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-${CARGO_TARGET_DIR:-$here/../../target}/kyverno/bin}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
stamp="$(cat "$here/go.mod" "$here/go.sum" "$here/build.sh" | sha256sum | cut -c1-16)"
if [ -f "$out/.stamp" ] && [ "$(cat "$out/.stamp")" = "$stamp" ] && [ -x "$out/kyverno" ]; then
  exit 0
fi
command -v go >/dev/null 2>&1 || { echo "build.sh: go not found on PATH" >&2; exit 3; }
cd "$here"
CGO_ENABLED=0 go build -trimpath -o "$out/kyverno" github.com/kyverno/kyverno/cmd/kyverno
echo "$stamp" > "$out/.stamp"
