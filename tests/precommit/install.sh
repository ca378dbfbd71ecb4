#!/usr/bin/env bash
# Installs pre-commit (https://pre-commit.com), pinned with its
# dependencies in tests/precommit/requirements.txt, from PyPI into a
# virtual environment at ${CARGO_TARGET_DIR:-target}/precommit/venv, for
# the test that runs the hook of .pre-commit-hooks.yaml with `pre-commit
# try-repo` (tests/lint_report/ci_templates.rs). Does nothing when the same
# requirements are installed already with the same python3.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
venv="$target/precommit/venv"
command -v python3 >/dev/null 2>&1 || { echo "install.sh: python3 not found on PATH" >&2; exit 3; }
stamp="$( (cat "$here/requirements.txt" "$0"; python3 --version) | sha256sum | cut -c1-16)"
if [ -x "$venv/bin/pre-commit" ] && [ -f "$venv/.stamp" ] && [ "$(cat "$venv/.stamp")" = "$stamp" ]; then
  exit 0
fi
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"
"$venv/bin/pre-commit" --version
echo "$stamp" > "$venv/.stamp"
