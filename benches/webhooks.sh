# Sourced by benches/admission-latency.sh and benches/concurrent-creates.sh
# (from the crate root): builds the webhooks the benchmarks through a real
# kube-apiserver install beside winadmit (benches/support/webhooks.rs) and
# exports where they are: the no-op webhook and winadmit with the bench
# profile, and Kyverno (benches/kyverno/build.sh, several minutes the first
# time) when Go is there; KYVERNO= (empty) leaves it out. With GATEKEEPER
# unset and WEBHOOKS_GATEKEEPER=1, OPA Gatekeeper too (GATEKEEPER= leaves it
# out). Defines bench_tables (below).
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
if [ "${WEBHOOKS_GATEKEEPER:-}" = 1 ]; then
  if [ -z "${GATEKEEPER+set}" ] && command -v go >/dev/null 2>&1; then
    benches/gatekeeper/build.sh "$target/gatekeeper/bin"
    export GATEKEEPER="$target/gatekeeper/bin/gatekeeper"
  fi
  if [ -n "${GATEKEEPER:-}" ] && [ -z "${GATEKEEPER_MANIFEST:-}" ]; then
    module="$(cd benches/gatekeeper && go list -m -f '{{.Dir}}' github.com/open-policy-agent/gatekeeper/v3)"
    export GATEKEEPER_MANIFEST="$module/manifest_staging/deploy/gatekeeper.yaml"
  fi
fi

# bench_tables BENCH MARKER WRITE_DOCS ARGS...: runs `cargo bench --bench
# BENCH -- ARGS...`, which prints Markdown tables, and with WRITE_DOCS
# `--write-docs` puts them between MARKER's begin and end comments in
# docs/BENCHMARKS.md.
bench_tables() {
  local bench="$1" marker="$2" write="$3" out
  shift 3
  out="$(mktemp)"
  cargo bench --locked --bench "$bench" -- "$@" | tee "$out"
  if [ "$write" = "--write-docs" ]; then
    python3 - "$marker" "$out" docs/BENCHMARKS.md <<'PY'
import sys
marker, tables, doc_path = sys.argv[1], open(sys.argv[2]).read().strip(), sys.argv[3]
doc = open(doc_path).read()
begin, end = f"<!-- {marker}:begin -->", f"<!-- {marker}:end -->"
head, rest = doc.split(begin, 1)
_, tail = rest.split(end, 1)
open(doc_path, "w").write(f"{head}{begin}\n{tables}\n{end}{tail}")
PY
  fi
  rm -f "$out"
}
