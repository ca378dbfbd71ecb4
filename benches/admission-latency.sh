#!/usr/bin/env bash
# What an admission setup adds to a pod create, through a real
# kube-apiserver v1.37 (benches/admission_latency.rs): builds the no-op
# webhook and winadmit with the bench profile, Kyverno and Gatekeeper from
# Go modules (benches/kyverno/build.sh, benches/gatekeeper/build.sh; several
# minutes each the first time) when Go is there, and the control plane if it
# is not built yet, then prints Markdown tables.
#
#   benches/admission-latency.sh [ROUNDS] [CREATES]   # default 5 200
#
# LATENCY_SETUPS=none,winadmit,one-call picks setups (default: all);
# KYVERNO= (empty) leaves Kyverno out, GATEKEEPER= (empty) Gatekeeper;
# --write-docs as the third argument also puts the tables into
# docs/BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-5}"
creates="${2:-200}"
write_docs="${3:-}"
target="${CARGO_TARGET_DIR:-target}"
# The bench profile, as `cargo bench` builds the benchmark: one build of the
# crate serves both.
cargo build --profile bench --locked --example noop_server
export NOOP_SERVER="$target/release/examples/noop_server"
if [ -z "${KYVERNO+set}" ] && command -v go >/dev/null 2>&1; then
  benches/kyverno/build.sh "$target/kyverno/bin"
  export KYVERNO="$target/kyverno/bin/kyverno"
fi
if [ -n "${KYVERNO:-}" ] && [ -z "${KYVERNO_CRDS:-}" ]; then
  module="$(cd benches/kyverno && go list -m -f '{{.Dir}}' github.com/kyverno/kyverno)"
  export KYVERNO_CRDS="$module/config/crds"
fi
if [ -z "${GATEKEEPER+set}" ] && command -v go >/dev/null 2>&1; then
  benches/gatekeeper/build.sh "$target/gatekeeper/bin"
  export GATEKEEPER="$target/gatekeeper/bin/gatekeeper"
fi
if [ -n "${GATEKEEPER:-}" ] && [ -z "${GATEKEEPER_MANIFEST:-}" ]; then
  module="$(cd benches/gatekeeper && go list -m -f '{{.Dir}}' github.com/open-policy-agent/gatekeeper/v3)"
  export GATEKEEPER_MANIFEST="$module/manifest_staging/deploy/gatekeeper.yaml"
fi
out="$(mktemp)"
cargo bench --locked --bench admission_latency -- "$rounds" "$creates" | tee "$out"
if [ "$write_docs" = "--write-docs" ]; then
  python3 - "$out" docs/BENCHMARKS.md <<'PY'
import sys
tables = open(sys.argv[1]).read().strip()
doc = open(sys.argv[2]).read()
begin, end = "<!-- admission-latency:begin -->", "<!-- admission-latency:end -->"
head, rest = doc.split(begin, 1)
_, tail = rest.split(end, 1)
open(sys.argv[2], "w").write(f"{head}{begin}\n{tables}\n{end}{tail}")
PY
fi
rm -f "$out"
