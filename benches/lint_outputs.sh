#!/usr/bin/env bash
# Saves everything `winadmit lint` prints for a fixed set of inputs, in every
# format, so two builds can be compared byte for byte (lint's output must
# not change when its parsing does).
#
# Usage: benches/lint_outputs.sh BINARY OUTDIR [BASELINE_OUTDIR]
#   Writes OUTDIR/<set>.<format>.{out,err,rc} and, for --fix, the files as
#   rewritten. With BASELINE_OUTDIR, then diffs the two and exits 1 on any
#   difference.
# Inputs (run from the repository root, as paths appear in the output):
#   /tmp/lintset          benches/lint_corpus.py /tmp/lintset (20k / 200 files)
#   /tmp/lintbig          benches/lint_corpus.py /tmp/lintbig 1 20000 (one file)
#   ../shared/corpus      the real manifests
#   tests/fixtures        the repository's fixtures (broken ones included)
# Missing generated sets are written first.
set -uo pipefail

BIN=$(realpath "$1")
OUT=$2
BASE=${3:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
[ -d /tmp/lintset ] || python3 benches/lint_corpus.py /tmp/lintset >/dev/null
[ -d /tmp/lintbig ] || python3 benches/lint_corpus.py /tmp/lintbig 1 20000 >/dev/null
rm -rf "$OUT"
mkdir -p "$OUT"

run() { # name, then lint arguments
    local name=$1
    shift
    for fmt in text json sarif junit; do
        "$BIN" lint --format "$fmt" "$@" >"$OUT/$name.$fmt.out" 2>"$OUT/$name.$fmt.err"
        echo $? >"$OUT/$name.$fmt.rc"
    done
}

run lintset /tmp/lintset
run lintbig /tmp/lintbig
run corpus ../shared/corpus
run fixtures tests/fixtures
WINADMIT_LINT_THREADS=1 run corpus-1thread ../shared/corpus
for f in tests/fixtures/lint/* tests/fixtures/fuzz-regressions/*; do
    [ -f "$f" ] || continue
    n=file-$(echo "$f" | tr '/' '_')
    "$BIN" lint "$f" >"$OUT/$n.out" 2>"$OUT/$n.err"
    echo $? >"$OUT/$n.rc"
done
"$BIN" lint --format json - <../shared/corpus/$(ls ../shared/corpus | grep -m1 '\.yaml$') \
    >"$OUT/stdin.out" 2>"$OUT/stdin.err"
echo $? >"$OUT/stdin.rc"

# --fix: on copies at a fixed path (the path is part of the output).
for set in corpus:../shared/corpus fixtures:tests/fixtures lintset:/tmp/lintset; do
    name=${set%%:*}
    src=${set#*:}
    work=/tmp/lint_outputs_fix/$name
    rm -rf "$work"
    mkdir -p "$(dirname "$work")"
    cp -r "$src" "$work"
    "$BIN" lint --fix --format json "$work" >"$OUT/fix-$name.out" 2>"$OUT/fix-$name.err"
    echo $? >"$OUT/fix-$name.rc"
    mkdir -p "$OUT/fixed-$name"
    cp -r "$work"/. "$OUT/fixed-$name/"
    rm -rf "$work"
done

if [ -n "$BASE" ]; then
    if diff -r -q "$BASE" "$OUT"; then
        echo "identical: $(find "$OUT" -type f | wc -l) files"
    else
        echo "DIFFERENT (diff -r $BASE $OUT)"
        exit 1
    fi
fi
