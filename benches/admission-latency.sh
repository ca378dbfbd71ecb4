#!/usr/bin/env bash
# What an admission setup adds to a pod create, through a real
# kube-apiserver v1.37 (benches/admission_latency.rs): builds the no-op
# webhook and winadmit with the release profile, the control plane if it is
# not built yet (tests/apiserver/build.sh), and prints a Markdown table.
#
#   benches/admission-latency.sh [ROUNDS] [CREATES]   # default 5 200
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-5}"
creates="${2:-200}"
cargo build --release --locked --example noop_server
target="${CARGO_TARGET_DIR:-target}"
export NOOP_SERVER="$target/release/examples/noop_server"
exec cargo bench --locked --bench admission_latency -- "$rounds" "$creates"
