#!/usr/bin/env bash
# What an admission setup adds to a pod create, through a real
# kube-apiserver v1.37 (benches/admission_latency.rs): builds the no-op
# webhook and winadmit with the bench profile, Kyverno and Gatekeeper from
# Go modules (benches/webhooks.sh; several minutes each the first time)
# when Go is there, and the control plane if it is not built yet, then
# prints Markdown tables.
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
WEBHOOKS_GATEKEEPER=1
# shellcheck source=benches/webhooks.sh
. benches/webhooks.sh
bench_tables admission_latency admission-latency "$write_docs" "$rounds" "$creates"
