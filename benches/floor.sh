#!/usr/bin/env bash
# The floor comparison: `winadmit serve --worker-threads 1`
# against benches/programs/noop_server.rs (the same axum + rustls + hyper stack,
# answering allowed:true after reading only the uid), both pinned to one
# CPU from exec (`taskset -c 0`: every thread, the log writer and the
# blocking pool included, inherits it), oha pinned to another, 16
# keep-alive HTTPS/1.1 connections.
#
# Two measures per run, both per review:
# - the servers' CPU time (utime+stime from /proc/PID/stat, before and
#   after the run, divided by the requests answered): what each review
#   costs, robust to other processes sharing the CPU;
# - req/s (1/rate is the CPU per review only on an otherwise idle core).
# "added us" is winadmit's CPU per review minus the floor's.
#
# Scenarios: an allowed 4 KiB defaulted Windows pod (/validate), a denial
# with its message and fixes (/validate), /mutate with a settled patch
# that adds spec.os (the same pod; benches/floor-policy.yaml is the
# default policy with mutation.setOsName: true), and the allowed pod at a fixed 2,000 req/s (latency).
# Each scenario alternates floor and winadmit, ROUNDS times.
#
# Usage: benches/floor.sh                  # 10 s per run, 2 rounds
#        DUR=5s ROUNDS=3 benches/floor.sh
#        NOBUILD=1 WIN_BIN=/tmp/winadmit-before benches/floor.sh   # A/B
# Env:   DUR, ROUNDS, CONC (16), RATE (2000), NOBUILD=1 (use the built
#        binaries), WIN_BIN (the winadmit binary), NOOP_BIN (the floor
#        server, the noop_server example), OUT (target/floor).
# Needs: oha (cargo install oha --locked), taskset, python3.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DUR=${DUR:-10s}
ROUNDS=${ROUNDS:-2}
CONC=${CONC:-16}
RATE=${RATE:-2000}
OUT=${OUT:-$ROOT/target/floor}
FIX=$ROOT/tests/fixtures/admission
WIN_PORT=${WIN_PORT:-18453}
NOOP_PORT=${NOOP_PORT:-19453}
WIN_BIN=${WIN_BIN:-$ROOT/target/dist/winadmit}
NOOP_BIN=${NOOP_BIN:-$ROOT/target/dist/examples/noop_server}

for tool in oha taskset python3 curl; do
  command -v $tool >/dev/null || { echo "floor.sh: needs $tool" >&2; exit 2; }
done
[[ $(nproc) -ge 2 ]] || { echo "floor.sh: needs 2 CPUs (server on 0, oha on 1)" >&2; exit 2; }

if [[ ${NOBUILD:-0} != 1 ]]; then
  (cd "$ROOT" && cargo build --profile dist --bin winadmit --example noop_server)
fi
rm -rf "$OUT" && mkdir -p "$OUT"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

taskset -c 0 "$WIN_BIN" serve --self-signed --self-signed-dir "$OUT/winadmit-ca" \
  --listen "127.0.0.1:$WIN_PORT" --worker-threads 1 --log-format json --policy "$ROOT/benches/floor-policy.yaml" >"$OUT/winadmit.log" 2>"$OUT/winadmit.err" &
pids+=($!) ; WIN_PID=$!
taskset -c 0 "$NOOP_BIN" "127.0.0.1:$NOOP_PORT" "$OUT/noop-ca" 1 \
  >"$OUT/noop.log" 2>&1 &
pids+=($!) ; NOOP_PID=$!

for _ in $(seq 100); do
  if curl -fsS --cacert "$OUT/winadmit-ca/ca.pem" "https://localhost:$WIN_PORT/healthz" >/dev/null 2>&1 &&
     curl -fsS --cacert "$OUT/noop-ca/ca.pem" "https://localhost:$NOOP_PORT/healthz" >/dev/null 2>&1; then break; fi
  sleep 0.1
done
sleep 1

# CPU ticks (utime+stime) of a process, all threads.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# run SCENARIO ROUND SERVER PATH BODY [oha args...]
run() {
  local name=$1 round=$2 server=$3 path=$4 body=$5 ; shift 5
  local port=$WIN_PORT ca=$OUT/winadmit-ca/ca.pem pid=$WIN_PID
  if [[ $server == noop ]]; then port=$NOOP_PORT ca=$OUT/noop-ca/ca.pem pid=$NOOP_PID; fi
  local tag=$name.$round.$server
  echo "== $tag ($(cut -d' ' -f1-3 /proc/loadavg))" >&2
  cut -d' ' -f1 /proc/loadavg >"$OUT/$tag.load0"
  ticks "$pid" >"$OUT/$tag.ticks0"
  taskset -c 1 oha --no-tui --output-format json -w -m POST -T application/json -D "$FIX/$body" \
    --cacert "$ca" "$@" "https://localhost:$port$path" >"$OUT/$tag.json"
  ticks "$pid" >"$OUT/$tag.ticks1"
  cut -d' ' -f1 /proc/loadavg >"$OUT/$tag.load1"
}

scenarios=(
  "allowed /validate pod-windows-create.json"
  "denied /validate pod-windows-denied.json"
  "mutate-os /mutate pod-windows-create.json"
  "rate2000 /validate pod-windows-create.json"
)
for round in $(seq "$ROUNDS"); do
  for s in "${scenarios[@]}"; do
    read -r name path body <<<"$s"
    args=(-z "$DUR" -c "$CONC")
    [[ $name == rate2000 ]] && args+=(-q "$RATE" --latency-correction)
    run "$name" "$round" noop "$path" "$body" "${args[@]}"
    run "$name" "$round" winadmit "$path" "$body" "${args[@]}"
  done
done
printf '%s\n' "${scenarios[@]}" >"$OUT/scenarios.txt"

python3 - "$OUT" "$ROUNDS" "$(getconf CLK_TCK)" <<'PY'
import json, os, statistics, sys
out, rounds, hz = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def one(tag):
    d = json.load(open(os.path.join(out, tag + ".json")))
    codes = d.get("statusCodeDistribution", {})
    n = sum(codes.values())
    bad = n - codes.get("200", 0) + sum(d.get("errorDistribution", {}).values())
    rd = lambda s: float(open(os.path.join(out, tag + s)).read())
    cpu = (rd(".ticks1") - rd(".ticks0")) / hz
    lp = d["latencyPercentiles"]
    return dict(rps=d["summary"]["requestsPerSec"], n=n, bad=bad, cpu_us=cpu / max(n, 1) * 1e6,
                p50=lp["p50"] * 1e6, p99=lp["p99"] * 1e6, load=(rd(".load0") + rd(".load1")) / 2)
lines = ["| scenario | round | floor req/s | winadmit req/s | ratio | floor CPU us/review | winadmit CPU us/review | added CPU us | floor p50/p99 us | winadmit p50/p99 us | errors | load avg |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|"]
summary = {}
for s in open(os.path.join(out, "scenarios.txt")):
    name = s.split()[0]
    for r in range(1, rounds + 1):
        f, w = one(f"{name}.{r}.noop"), one(f"{name}.{r}.winadmit")
        added = w["cpu_us"] - f["cpu_us"]
        summary.setdefault(name, []).append((w["rps"] / f["rps"], added))
        lines.append(f"| {name} | {r} | {f['rps']:.0f} | {w['rps']:.0f} | {w['rps'] / f['rps']:.2f} | "
                     f"{f['cpu_us']:.1f} | {w['cpu_us']:.1f} | {added:+.1f} | {f['p50']:.0f}/{f['p99']:.0f} | "
                     f"{w['p50']:.0f}/{w['p99']:.0f} | {f['bad']}+{w['bad']} | {(f['load'] + w['load']) / 2:.1f} |")
lines.append("")
lines.append("Medians over rounds (ratio of req/s; added CPU us per review):")
for name, v in summary.items():
    lines.append(f"- {name}: ratio {statistics.median(x for x, _ in v):.2f}, added {statistics.median(a for _, a in v):+.1f} us")
text = "\n".join(lines) + "\n"
open(os.path.join(out, "summary.md"), "w").write(text)
print(text)
PY
