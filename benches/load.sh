#!/usr/bin/env bash
# Load benchmark for `winadmit serve`, against a no-op webhook on the same
# stack (benches/programs/noop_server.rs: same listener, rustls config, hyper and
# axum middleware, answering allowed:true after reading the uid), measured
# in the same run, scenario by scenario, alternating the two servers.
#
# Load generator: oha (cargo install oha --locked). HTTPS with the servers'
# self-signed ECDSA P-256 CAs; HTTP/1.1 keep-alive as the API server calls
# webhooks, HTTP/2, a fixed rate, a new TLS connection per request, and
# large reviews. Results: target/load/summary.md (and one JSON per run).
#
# The floor comparison (CPU per review against this floor, 16
# connections, allowed / denied / mutate / fixed rate) is benches/floor.sh.
#
# Usage: benches/load.sh            # 10 s per run
#        DUR=30s SOAK=60s benches/load.sh
# Env:   DUR (per run), CONC (connections, default 25 = the API server's
#        idle pool per host), RATE (fixed-rate runs, req/s), SOAK (a soak
#        run on winadmit, e.g. 60s; 0 skips), PIN=0 to not pin CPUs,
#        THREADS (server worker threads, default 1).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DUR=${DUR:-10s}
CONC=${CONC:-25}
RATE=${RATE:-2000}
SOAK=${SOAK:-0}
PIN=${PIN:-1}
THREADS=${THREADS:-1}
OUT=${OUT:-$ROOT/target/load}
FIX=$ROOT/tests/fixtures/admission
WIN_PORT=${WIN_PORT:-18443}
NOOP_PORT=${NOOP_PORT:-19443}

command -v oha >/dev/null || { echo "load.sh: needs oha: cargo install oha --locked" >&2; exit 2; }
command -v python3 >/dev/null || { echo "load.sh: needs python3 for the summary" >&2; exit 2; }

# Servers on CPU 0, the load generator on CPU 1 (a 2-core machine).
server_cpu=() ; client_cpu=()
if [[ $PIN == 1 ]] && command -v taskset >/dev/null && [[ $(nproc) -ge 2 ]]; then
  server_cpu=(taskset -c 0) ; client_cpu=(taskset -c 1)
fi

(cd "$ROOT" && cargo build --profile dist --bin winadmit --example noop_server)
rm -rf "$OUT" && mkdir -p "$OUT"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

"${server_cpu[@]}" "$ROOT/target/dist/winadmit" serve --self-signed --self-signed-dir "$OUT/winadmit-ca" \
  --listen "127.0.0.1:$WIN_PORT" --worker-threads "$THREADS" --log-format json >"$OUT/winadmit.log" 2>"$OUT/winadmit.err" &
pids+=($!) ; WIN_PID=$!
"${server_cpu[@]}" "$ROOT/target/dist/examples/noop_server" "127.0.0.1:$NOOP_PORT" "$OUT/noop-ca" "$THREADS" \
  >"$OUT/noop.log" 2>&1 &
pids+=($!) ; NOOP_PID=$!

for i in $(seq 100); do
  if curl -fsS --cacert "$OUT/winadmit-ca/ca.pem" "https://localhost:$WIN_PORT/healthz" >/dev/null 2>&1 &&
     curl -fsS --cacert "$OUT/noop-ca/ca.pem" "https://localhost:$NOOP_PORT/healthz" >/dev/null 2>&1; then break; fi
  sleep 0.1
done
sleep 1
rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
hwm() { awk '/^VmHWM/ {print $2}' "/proc/$1/status"; }
echo "winadmit idle_rss_kib $(rss $WIN_PID)" >"$OUT/rss.txt"
echo "noop idle_rss_kib $(rss $NOOP_PID)" >>"$OUT/rss.txt"

# run NAME SERVER PATH BODY [oha args...]
run() {
  local name=$1 server=$2 path=$3 body=$4 ; shift 4
  local port=$WIN_PORT ca=$OUT/winadmit-ca/ca.pem
  if [[ $server == noop ]]; then port=$NOOP_PORT ca=$OUT/noop-ca/ca.pem; fi
  echo "== $name on $server" >&2
  "${client_cpu[@]}" oha --no-tui --output-format json -w -m POST -T application/json -D "$FIX/$body" \
    --cacert "$ca" "$@" "https://localhost:$port$path" >"$OUT/$name.$server.json"
}

# scenario NAME PATH BODY [oha args...]: both servers, alternating.
scenario() {
  local name=$1 ; shift
  echo "$name $*" >>"$OUT/scenarios.txt"
  run "$name" noop "$@"
  run "$name" winadmit "$@"
}

scenario h1-pod4k-validate /validate pod-windows-create.json -z "$DUR" -c "$CONC"
scenario h2-pod4k-validate /validate pod-windows-create.json -z "$DUR" -c 5 -p 5 --http2
scenario h1-pod4k-rate /validate pod-windows-create.json -z "$DUR" -c "$CONC" -q "$RATE" --latency-correction
scenario h1-deploy-validate /validate deployment-windows-create.json -z "$DUR" -c "$CONC"
scenario h1-denied-validate /validate pod-windows-denied.json -z "$DUR" -c "$CONC"
scenario h1-fixable-mutate /mutate pod-windows-fixable.json -z "$DUR" -c "$CONC"
scenario h1-newconn-pod4k /validate pod-windows-create.json -z "$DUR" -c "$CONC" --disable-keepalive
scenario h1-pod20k-mutate /mutate pod-windows-create-20k.json -z "$DUR" -c "$CONC"
scenario h1-update30k-validate /validate pod-update-30k.json -z "$DUR" -c "$CONC"
if [[ $SOAK != 0 ]]; then
  echo "soak-h1-pod4k /validate pod-windows-create.json -z $SOAK -c $CONC" >>"$OUT/scenarios.txt"
  run soak-h1-pod4k winadmit /validate pod-windows-create.json -z "$SOAK" -c "$CONC"
fi

echo "winadmit peak_rss_kib $(hwm $WIN_PID)" >>"$OUT/rss.txt"
echo "noop peak_rss_kib $(hwm $NOOP_PID)" >>"$OUT/rss.txt"
sleep 2
echo "winadmit rss_after_load_kib $(rss $WIN_PID)" >>"$OUT/rss.txt"
curl -fsS --cacert "$OUT/winadmit-ca/ca.pem" "https://localhost:$WIN_PORT/metrics" >"$OUT/metrics.txt"

python3 - "$OUT" <<'PY'
import json, os, re, sys
out = sys.argv[1]
rows = []
names = [l.split()[0] for l in open(os.path.join(out, "scenarios.txt"))]
def load(name, server):
    p = os.path.join(out, f"{name}.{server}.json")
    if not os.path.exists(p):
        return None
    d = json.load(open(p))
    codes = d.get("statusCodeDistribution", {})
    ok = codes.get("200", 0)
    total = sum(codes.values()) + sum(d.get("errorDistribution", {}).values())
    lp = d["latencyPercentiles"]
    return dict(rps=d["summary"]["requestsPerSec"], p50=lp["p50"] * 1e6, p99=lp["p99"] * 1e6,
                p999=lp["p99.9"] * 1e6, bad=total - ok, total=total)
lines = ["| scenario | server | req/s | p50 us | p99 us | p99.9 us | non-200/errors | winadmit/noop req/s | p50 delta us |",
         "|---|---|---|---|---|---|---|---|---|"]
for n in names:
    noop, win = load(n, "noop"), load(n, "winadmit")
    for server, r in (("noop", noop), ("winadmit", win)):
        if r is None:
            continue
        ratio = delta = ""
        if server == "winadmit" and noop:
            ratio = f"{r['rps'] / noop['rps'] * 100:.0f}%"
            delta = f"{r['p50'] - noop['p50']:+.0f}"
        lines.append(f"| {n} | {server} | {r['rps']:.0f} | {r['p50']:.0f} | {r['p99']:.0f} | {r['p999']:.0f} | {r['bad']}/{r['total']} | {ratio} | {delta} |")
# In-server time per review from the latency histogram (microsecond buckets).
buckets = {}
for line in open(os.path.join(out, "metrics.txt")):
    m = re.match(r'winadmit_admission_duration_seconds_bucket\{le="([^"]+)",endpoint="(\w+)"\} (\d+)', line)
    if m:
        buckets.setdefault(m.group(2), []).append((float("inf") if m.group(1) == "+Inf" else float(m.group(1)), int(m.group(3))))
lines.append("")
lines.append("In-server time per review under load (winadmit_admission_duration_seconds, bucket upper bounds):")
for ep, bs in sorted(buckets.items()):
    total = bs[-1][1]
    q = {}
    for p in (0.5, 0.99, 0.999):
        q[p] = next(le for le, c in bs if c >= p * total)
    lines.append(f"- {ep}: {total} reviews, p50 <= {q[0.5]*1e6:.0f} us, p99 <= {q[0.99]*1e6:.0f} us, p99.9 <= {q[0.999]*1e6:.0f} us")
lines.append("")
lines.append("Resident memory (KiB):")
for l in open(os.path.join(out, "rss.txt")):
    lines.append(f"- {l.strip()}")
text = "\n".join(lines) + "\n"
open(os.path.join(out, "summary.md"), "w").write(text)
print(text)
PY
