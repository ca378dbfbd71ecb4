#!/usr/bin/env bash
# Where a review's added CPU goes, by ablation on the real server.
# benches/floor.sh measures winadmit against the floor; this
# script runs it three times against one build of HEAD with
# benches/ablation.patch applied, which adds a switch to
# `admission::decode` and `admission::review_decoded` (never on main):
#
#   full         WINADMIT_ABLATE unset: the product as it is;
#   no-decision  decode the whole envelope and object view, build the
#                summary, answer allowed through the same encoder, but
#                do not decide (no rules, no message, no patch);
#   uid-only     read only the uid, like the floor, and answer allowed,
#                with the router, metrics and request log line kept.
#
# Differences between the rows are the stages' costs on a pinned core
# under load, without a profiler's attribution:
#   uid-only              - floor: routing, metrics, the log line;
#   no-decision - uid-only       : decoding the view (and its encode);
#   full        - no-decision    : deciding, the message, the patch.
#
# Usage: benches/ablate.sh                # DUR=6s ROUNDS=2
#        NOBUILD=1 benches/ablate.sh      # reuse target/ablate's build
# Env:   DUR, ROUNDS (passed to floor.sh), WORK (target/ablate).
# Needs: what floor.sh needs, and git. The build takes ~5 minutes (fat LTO).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${WORK:-$ROOT/target/ablate}
export DUR=${DUR:-6s} ROUNDS=${ROUNDS:-2}
mkdir -p "$WORK"

if [[ ${NOBUILD:-0} != 1 ]]; then
  tree=$WORK/tree
  git -C "$ROOT" worktree remove --force "$tree" 2>/dev/null || rm -rf "$tree"
  git -C "$ROOT" worktree add --detach "$tree" HEAD >/dev/null
  trap 'git -C "$ROOT" worktree remove --force "$tree"' EXIT
  git -C "$tree" apply "$ROOT/benches/ablation.patch" ||
    { echo "ablate.sh: benches/ablation.patch no longer applies to HEAD; update it" >&2; exit 2; }
  (cd "$tree" && CARGO_TARGET_DIR=$WORK/target cargo build --profile dist --locked \
    --bin winadmit --example noop_server)
fi

for mode in full no-decision uid-only; do
  wrapper=$WORK/winadmit-$mode
  if [[ $mode == full ]]; then
    printf '#!/bin/sh\nexec %s "$@"\n' "$WORK/target/dist/winadmit" >"$wrapper"
  else
    printf '#!/bin/sh\nWINADMIT_ABLATE=%s exec %s "$@"\n' "$mode" "$WORK/target/dist/winadmit" >"$wrapper"
  fi
  chmod +x "$wrapper"
  echo "== $mode" >&2
  OUT=$WORK/$mode NOBUILD=1 WIN_BIN=$wrapper NOOP_BIN=$WORK/target/dist/examples/noop_server \
    "$ROOT/benches/floor.sh" >/dev/null
done

python3 - "$WORK" <<'PY'
import re, sys
work = sys.argv[1]
modes = ["full", "no-decision", "uid-only"]
added = {}
for m in modes:
    for line in open(f"{work}/{m}/summary.md"):
        hit = re.match(r"- (\S+): ratio ([\d.]+), added ([+-][\d.]+) us", line)
        if hit:
            added.setdefault(hit[1], {})[m] = (float(hit[3]), float(hit[2]))
print("| scenario | full | no-decision | uid-only | log, metrics, routing | decoding the view | deciding |")
print("|---|---|---|---|---|---|---|")
for scen, row in added.items():
    f, n, u = (row[m][0] for m in modes)
    cells = " | ".join(f"{row[m][0]:+.1f} us ({row[m][1]:.2f})" for m in modes)
    print(f"| {scen} | {cells} | {u:+.1f} | {n - u:+.1f} | {f - n:+.1f} |")
print("\nAdded CPU per review over the floor (median of rounds), with the req/s ratio;")
print("the last three columns are uid-only, no-decision - uid-only, full - no-decision.")
PY
