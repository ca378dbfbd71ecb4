#!/usr/bin/env bash
# Builds kube-apiserver v1.36.3 (the version matrix of tests/cluster/version_matrix.rs)
# from this Go module into OUT (default: target/controlplane/v1.36/bin), unless
# it is already there (tests/go-build.sh). etcd and kubectl come from the
# v1.37 build of tests/apiserver/build.sh.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
V="-X k8s.io/component-base/version.gitVersion=v1.36.3 -X k8s.io/component-base/version.gitMajor=1"
V="$V -X k8s.io/component-base/version.gitMinor=36 -X k8s.io/client-go/pkg/version.gitVersion=v1.36.3"
GO_LDFLAGS="$V" exec "$here/../../go-build.sh" "$here" "${1:-$here/../../../target/controlplane/v1.36/bin}" \
  kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
