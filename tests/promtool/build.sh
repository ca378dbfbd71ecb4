#!/usr/bin/env bash
# Builds promtool (Prometheus v3.16.0, Go module v0.316.0) from this Go
# module (go.mod's `tool` line) into OUT (default:
# $CARGO_TARGET_DIR/promtool/bin, or target/promtool/bin), unless it is
# already there (tests/go-build.sh). tests/install/audit_monitoring.rs runs
# `promtool test rules` on the chart's alerting rules. About 9 minutes with
# cold Go caches on 2 cores shared with other builds; 3 s once they are
# warm.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# remove_all_sd leaves out Prometheus's optional service-discovery plugins
# (their cloud SDKs: a fifth of the packages); promtool imports the
# Kubernetes discovery itself, so that one stays. The version flag is the
# one of Prometheus's own release build (`promtool --version`).
GO_TAGS=remove_all_sd GO_LDFLAGS="-X github.com/prometheus/common/version.Version=3.16.0" \
  exec "$here/../go-build.sh" "$here" \
  "${1:-${CARGO_TARGET_DIR:-$here/../../target}/promtool/bin}" \
  promtool github.com/prometheus/prometheus/cmd/promtool
