#!/usr/bin/env bash
# Builds crane (go-containerregistry v0.22.1: assembles, pushes and reads
# OCI images) and actionlint v1.7.12 (checks .github/workflows) from this Go
# module into OUT (default: $CARGO_TARGET_DIR/image/bin, or
# target/image/bin), unless they are already there (tests/go-build.sh).
# image/build.sh uses crane; tests/webhook/image.rs uses both.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec "$here/../go-build.sh" "$here" \
  "${1:-${CARGO_TARGET_DIR:-$here/../../target}/image/bin}" \
  crane github.com/google/go-containerregistry/cmd/crane \
  actionlint github.com/rhysd/actionlint/cmd/actionlint
