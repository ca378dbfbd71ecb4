#!/usr/bin/env python3
"""Joins the real corpus into one large multi-document file, for lint's
memory on a file of real manifests (docs/BENCHMARKS.md, "lint on one
large file").

Usage: benches/corpus_join.py CORPUS_DIR OUT [BYTES] [--with-broken]
  CORPUS_DIR  ../shared/corpus
  OUT         the file to write, e.g. /tmp/corpus10ok.yaml
  BYTES       at least this many bytes (default 10,000,000)
  --with-broken  also append the files lint reports input errors for once
              at the end (e.g. /tmp/corpus10.yaml), which sends the file
              through lint's per-document path

Each manifest file (.yaml, .yml) is written after a `---` line, in name
order, again and again until OUT reaches BYTES. A file is "broken" when
`BIN lint --format json FILE` reports input errors; BIN is $WINADMIT_BIN or
target/release/winadmit.
"""

import json
import os
import subprocess
import sys


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    with_broken = "--with-broken" in sys.argv[1:]
    if len(args) < 2:
        sys.exit(__doc__)
    corpus, out = args[0], args[1]
    target = int(args[2]) if len(args) > 2 else 10_000_000
    binary = os.environ.get("WINADMIT_BIN", "target/release/winadmit")

    good, broken = [], []
    for name in sorted(os.listdir(corpus)):
        if not name.endswith((".yaml", ".yml")):
            continue
        path = os.path.join(corpus, name)
        run = subprocess.run(
            [binary, "lint", "--format", "json", path], capture_output=True, text=True
        )
        summary = json.loads(run.stdout)["summary"]
        text = open(path, encoding="utf-8").read()
        if not text.endswith("\n"):
            text += "\n"
        (broken if summary["inputErrors"] else good).append("---\n" + text)
    if not good:
        sys.exit(f"no manifest in {corpus} lints without input errors")

    parts, size = [], 0
    while size < target:
        for text in good:
            parts.append(text)
            size += len(text.encode())
            if size >= target:
                break
    if with_broken:
        parts.extend(broken)
    with open(out, "w", encoding="utf-8") as f:
        f.write("".join(parts))
    print(f"{out}: {os.path.getsize(out)} bytes, {len(good)} files repeated, "
          f"{len(broken) if with_broken else 0} broken appended")


if __name__ == "__main__":
    main()
