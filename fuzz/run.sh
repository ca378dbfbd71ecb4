#!/usr/bin/env bash
# Runs each cargo-fuzz target for a bounded time (default 60 s each).
#   fuzz/run.sh [seconds] [target...]
# Needs cargo-fuzz (`cargo install cargo-fuzz --locked`). cargo-fuzz needs
# nightly-only rustc flags (-Zsanitizer, -Cpasses=sancov); on a stable
# toolchain RUSTC_BOOTSTRAP=1 enables them. Seeds come from the test
# fixtures (read-only); new corpus entries go to fuzz/corpus/<target>/
# (git-ignored, capped by -max_len). A crash leaves its input in
# fuzz/artifacts/<target>/: commit it under
# tests/fixtures/fuzz-regressions/<target>/ with the fix, and
# tests/verdicts/fuzz_regressions.rs replays it in `cargo test`.
# Set FUZZ_CLEAN=1 to delete fuzz/target afterwards (it is ~1 GB).
set -euo pipefail
cd "$(dirname "$0")/.."

secs="${1:-60}"
shift || true
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
  targets=(admission_review manifest_load patch_generation)
fi

seeds_for() {
  case "$1" in
    admission_review) echo tests/fixtures/admission tests/fixtures/fuzz-regressions/admission_review ;;
    *) echo tests/fixtures/lint tests/fixtures/report tests/fixtures/fuzz-regressions/"$1" ;;
  esac
}

export RUSTC_BOOTSTRAP="${RUSTC_BOOTSTRAP:-1}"
status=0
for t in "${targets[@]}"; do
  mkdir -p "fuzz/corpus/$t" "tests/fixtures/fuzz-regressions/$t"
  echo "==> fuzzing $t for ${secs}s"
  # shellcheck disable=SC2046
  if ! cargo fuzz run --fuzz-dir fuzz "$t" "fuzz/corpus/$t" $(seeds_for "$t") -- \
      -max_total_time="$secs" -max_len=262144 -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 2>&1 | tee "fuzz/last-$t.log" | grep -E '^(#[0-9]+ +DONE|Done|stat::number_of_executed_units|stat::peak_rss_mb|==[0-9]+==|SUMMARY|artifact_prefix|Test unit written)' ; then
    :
  fi
  if grep -qE 'SUMMARY|Test unit written|panicked' "fuzz/last-$t.log"; then
    echo "!! $t found a crash: see fuzz/last-$t.log and fuzz/artifacts/$t/" >&2
    status=1
  fi
done
if [ "${FUZZ_CLEAN:-0}" = 1 ]; then rm -rf fuzz/target; fi
exit "$status"
