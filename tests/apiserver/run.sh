#!/bin/sh
# Runs etcd and kube-apiserver for one test process, and stops them when that
# process goes away, even if it crashed: the test holds this script's stdin,
# and end of input means "stop". A line `restart-apiserver` on stdin stops
# the API server and starts it again on the same port and etcd; a line
# `adopt PID` names a process the tests started (a `winadmit serve` held in
# a static, which Rust never drops) to kill first, at the end.
#
# Stop order: the API server first, then etcd, each with SIGTERM and SIGKILL
# after 5 s (an API server left without etcd ignores SIGTERM and spins).
#
# Environment: BIN (etcd, kube-apiserver), WORK (pki/ and logs), ETCD_PORT,
# PEER_PORT, API_PORT; APISERVER, another kube-apiserver than BIN's (an older
# version of the matrix, tests/apiserver/v1.NN/), and APISERVER_FLAGS, more
# flags for it (feature gates, runtime-config), both optional.
set -u
cd "$WORK"
"$BIN/etcd" --data-dir "$WORK/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$PEER_PORT" \
  --initial-cluster "default=http://127.0.0.1:$PEER_PORT" --unsafe-no-fsync=true \
  >"$WORK/etcd.log" 2>&1 </dev/null &
etcd=$!

start_apiserver() {
  # shellcheck disable=SC2086 # APISERVER_FLAGS is a list of flags
  "${APISERVER:-$BIN/kube-apiserver}" ${APISERVER_FLAGS:-} --etcd-servers="http://127.0.0.1:$ETCD_PORT" --cert-dir="$WORK/pki" \
    --tls-cert-file="$WORK/pki/apiserver.crt" --tls-private-key-file="$WORK/pki/apiserver.key" \
    --secure-port="$API_PORT" --bind-address=127.0.0.1 --service-cluster-ip-range=10.0.0.0/24 \
    --allow-privileged=true --disable-admission-plugins=ServiceAccount --authorization-mode=RBAC \
    --service-account-issuer="https://127.0.0.1:$API_PORT/" \
    --service-account-key-file="$WORK/pki/sa.pub" --service-account-signing-key-file="$WORK/pki/sa.key" \
    --client-ca-file="$WORK/pki/client-ca.crt" \
    >>"$WORK/apiserver.log" 2>&1 </dev/null &
  apiserver=$!
}

stop() {
  kill -TERM "$1" 2>/dev/null
  i=0
  while kill -0 "$1" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
  kill -KILL "$1" 2>/dev/null
  wait "$1" 2>/dev/null
}

start_apiserver
echo "started etcd=$etcd apiserver=$apiserver"
adopted=""
while read -r line; do
  case "$line" in
    restart-apiserver) stop "$apiserver"; start_apiserver; echo "restarted apiserver=$apiserver" ;;
    adopt\ *) adopted="$adopted ${line#adopt }" ;;
  esac
done
for pid in $adopted; do kill -KILL "$pid" 2>/dev/null; done
stop "$apiserver"
stop "$etcd"
rm -rf "$WORK"
