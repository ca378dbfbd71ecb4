#!/usr/bin/env bash
# Builds Go programs the tests and benchmarks run (the control plane, helm,
# promtool, Kyverno, Gatekeeper) from a Go module folder whose go.mod pins
# their versions, into OUT, unless they are already there for the same
# go.mod, go.sum, Go sources of the folder, packages, link flags, build
# tags and this script.
#
#   tests/go-build.sh MODULE_DIR OUT NAME PACKAGE [NAME PACKAGE ...]
#
# GO_LDFLAGS, when set, is passed to `go build -ldflags`, and GO_TAGS (a
# comma-separated list) to `go build -tags`. Exits 3 when go is not on PATH.
set -euo pipefail
if [ $# -lt 4 ] || [ $(($# % 2)) -ne 0 ]; then
  echo "usage: go-build.sh MODULE_DIR OUT NAME PACKAGE [NAME PACKAGE ...]" >&2
  exit 2
fi
here="$(cd "$1" && pwd)"
mkdir -p "$2"
out="$(cd "$2" && pwd)"
shift 2
pairs=("$@")
stamp="$( (cat "$here/go.mod" "$here/go.sum" "$0"; find "$here" -name '*.go' | sort | xargs -r cat; echo "${pairs[*]}" "${GO_LDFLAGS:-}" "${GO_TAGS:-}") | sha256sum | cut -c1-16)"
fresh=1
for ((i = 0; i < ${#pairs[@]}; i += 2)); do
  [ -x "$out/${pairs[i]}" ] || fresh=0
done
if [ "$fresh" = 1 ] && [ -f "$out/.stamp" ] && [ "$(cat "$out/.stamp")" = "$stamp" ]; then
  exit 0
fi
command -v go >/dev/null 2>&1 || { echo "go-build.sh: go not found on PATH" >&2; exit 3; }
cd "$here"
for ((i = 0; i < ${#pairs[@]}; i += 2)); do
  CGO_ENABLED=0 go build -trimpath -ldflags "${GO_LDFLAGS:-}" -tags "${GO_TAGS:-}" -o "$out/${pairs[i]}" "${pairs[i + 1]}"
done
echo "$stamp" > "$out/.stamp"
