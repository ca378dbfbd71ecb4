#!/usr/bin/env bash
# Pod creates from many clients at once through a real kube-apiserver
# v1.37 with kube-scheduler, kube-controller-manager and KWOK nodes
# (benches/concurrent_creates.rs), and a Deployment rollout: builds the
# no-op webhook and winadmit with the bench profile and Kyverno from Go
# modules (benches/webhooks.sh) when Go is there, then prints Markdown
# tables. The control plane and KWOK must be built (tests/apiserver/build.sh,
# tests/kwok/build.sh).
#
#   benches/concurrent-creates.sh [RUNS] [CREATES_PER_CLIENT] [--write-docs]   # default 3 10
#
# CLIENTS=10,200,500 (the default) sets the numbers of concurrent clients;
# CONCURRENT_SETUPS=none,winadmit,one-call picks setups (default: all);
# ROLLOUT_REPLICAS=1000 (the default) sizes the Deployment, 0 leaves the
# rollout out; KYVERNO= (empty) leaves Kyverno out. --write-docs also puts
# the tables into docs/BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-3}"
per_client="${2:-10}"
write_docs="${3:-}"
export CLIENTS="${CLIENTS:-10,200,500}"
# shellcheck source=benches/webhooks.sh
. benches/webhooks.sh
bench_tables concurrent_creates concurrent-creates "$write_docs" "$runs" "$per_client"
