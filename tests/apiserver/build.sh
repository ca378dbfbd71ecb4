#!/usr/bin/env bash
# Builds the test control plane (kube-apiserver, kubectl, etcd, and
# kube-scheduler and kube-controller-manager for the scheduling cluster of
# tests/support/scheduling.rs) from this Go module into OUT (default:
# target/controlplane/bin), unless it is already there (tests/go-build.sh). Go's module and build caches make a rebuild
# take seconds once warm; cold it is about 5 minutes on 2 cores.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
V="-X k8s.io/component-base/version.gitVersion=v1.37.2 -X k8s.io/component-base/version.gitMajor=1"
V="$V -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/client-go/pkg/version.gitVersion=v1.37.2"
GO_LDFLAGS="$V" exec "$here/../go-build.sh" "$here" "${1:-$here/../../target/controlplane/bin}" \
  kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver kubectl k8s.io/kubernetes/cmd/kubectl etcd ./etcd \
  kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler \
  kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
