#!/usr/bin/env bash
# Builds a Go program the latency benchmark runs beside winadmit
# (benches/admission_latency.rs) from a Go module folder of benches/ (its
# go.mod's `tool` line pins the version) into OUT, unless it is already
# there for the same go.mod, go.sum, package and this script.
#
#   benches/go-build.sh MODULE_DIR NAME PACKAGE OUT
#
# Exits 3 when go is not on PATH.
set -euo pipefail
here="$(cd "$1" && pwd)"
name="$2"
package="$3"
out="$4"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
stamp="$( (cat "$here/go.mod" "$here/go.sum" "$0"; echo "$package") | sha256sum | cut -c1-16)"
if [ -f "$out/.stamp" ] && [ "$(cat "$out/.stamp")" = "$stamp" ] && [ -x "$out/$name" ]; then
  exit 0
fi
command -v go >/dev/null 2>&1 || { echo "go-build.sh: go not found on PATH" >&2; exit 3; }
cd "$here"
CGO_ENABLED=0 go build -trimpath -o "$out/$name" "$package"
echo "$stamp" > "$out/.stamp"
