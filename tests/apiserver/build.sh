#!/usr/bin/env bash
# Builds the test control plane (kube-apiserver, kubectl, etcd) from this Go
# module into OUT (default: target/controlplane/bin), unless it is already
# there for the same go.mod, go.sum and etcd/main.go. Go's module and build
# caches make a rebuild take seconds once warm; cold it is about 5 minutes
# on 2 cores.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/../../target/controlplane/bin}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
stamp="$(cat "$here/go.mod" "$here/go.sum" "$here/etcd/main.go" "$here/build.sh" | sha256sum | cut -c1-16)"
if [ -f "$out/.stamp" ] && [ "$(cat "$out/.stamp")" = "$stamp" ] \
  && [ -x "$out/kube-apiserver" ] && [ -x "$out/kubectl" ] && [ -x "$out/etcd" ]; then
  exit 0
fi
command -v go >/dev/null 2>&1 || { echo "build.sh: go not found on PATH" >&2; exit 3; }
V="-X k8s.io/component-base/version.gitVersion=v1.37.2 -X k8s.io/component-base/version.gitMajor=1"
V="$V -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/client-go/pkg/version.gitVersion=v1.37.2"
cd "$here"
CGO_ENABLED=0 go build -trimpath -ldflags "$V" -o "$out/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl ./etcd
echo "$stamp" > "$out/.stamp"
