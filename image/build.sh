#!/usr/bin/env bash
# Builds the winadmit image without a Docker engine and pushes it to REF:
#
#   image/build.sh [REF]        (default ghcr.io/winadmit/winadmit:VERSION)
#
# The image holds one layer: the `dist` binary at /usr/local/bin/winadmit,
# the glibc libraries it links and Debian's CA certificates (each copied
# from this machine's Debian packages, named in the image's labels), and an
# /etc/passwd naming the user 65532 it runs as. No shell, no package
# manager. The layer is written with fixed owners, modes and times
# (SOURCE_DATE_EPOCH, default the commit time) and the binary with paths
# remapped, so the same commit on the same Debian release gives the same
# layer. crane (go-containerregistry, built by tests/image/build.sh)
# appends the layer to an empty base, sets the config and pushes. Log in to
# a private registry first with `target/image/bin/crane auth login HOST`.
#
# Environment: CRANE (a crane binary), WINADMIT_IMAGE_OUT (work folder,
# default target/image), SOURCE_DATE_EPOCH.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)"
ref="${1:-ghcr.io/winadmit/winadmit:$version}"
out="${WINADMIT_IMAGE_OUT:-${CARGO_TARGET_DIR:-$root/target}/image}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"
crane="${CRANE:-}"
if [ -z "$crane" ]; then
  tests/image/build.sh "$out/bin"
  crane="$out/bin/crane"
fi

# The dist binary, symbols stripped, with this checkout's and cargo's paths
# replaced so that they do not end up in the binary. Its own target folder:
# other RUSTFLAGS would rebuild the default one.
echo "==> cargo build --profile dist --locked --bin winadmit" >&2
CARGO_PROFILE_DIST_STRIP=symbols \
RUSTFLAGS="--remap-path-prefix=$root=/src --remap-path-prefix=${CARGO_HOME:-$HOME/.cargo}=/cargo" \
  cargo build --profile dist --locked --bin winadmit --target-dir "$out/cargo"
bin="$out/cargo/dist/winadmit"

rootfs="$out/rootfs"
rm -rf "$rootfs"
mkdir -p "$rootfs/usr/local/bin" "$rootfs/etc/ssl/certs" "$rootfs/tmp"
install -m 0755 "$bin" "$rootfs/usr/local/bin/winadmit"
# The libraries the binary links, at the paths the dynamic loader looks in.
libs=()
while read -r path; do
  mkdir -p "$rootfs$(dirname "$path")"
  install -m 0755 "$(readlink -f "$path")" "$rootfs$path"
  libs+=("$path")
done < <(ldd "$bin" | grep -o '/[^ ]*' | sort -u)
install -m 0644 /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/:/sbin/nologin\n' > "$rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' > "$rootfs/etc/group"
chmod 0644 "$rootfs/etc/passwd" "$rootfs/etc/group"
chmod 1777 "$rootfs/tmp"

# The Debian packages the files come from, for the labels.
pkgs="$(for f in "${libs[@]}" /etc/ssl/certs/ca-certificates.crt; do
  dpkg -S "$(readlink -f "$f")" 2>/dev/null || dpkg -S "$f" 2>/dev/null || true
done | cut -d: -f1 | sort -u | while read -r p; do
  printf '%s=%s ' "$p" "$(dpkg-query -W -f '${Version}' "$p")"; done)"
[ -n "$pkgs" ] || pkgs="unknown"

layer="$out/layer.tar.gz"
(cd "$rootfs" && find . -mindepth 1 -printf '%P\n' | LC_ALL=C sort) > "$out/files"
tar -C "$rootfs" --format=gnu --no-recursion --numeric-owner --owner=0 --group=0 \
  --mtime="@$SOURCE_DATE_EPOCH" -cf - -T "$out/files" \
  | gzip -n -9 > "$layer"

commit="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
echo "==> crane append + mutate -> $ref" >&2
"$crane" append --oci-empty-base --platform linux/amd64 -f "$layer" -t "$ref" >/dev/null
"$crane" mutate "$ref" -t "$ref" \
  --user 65532:65532 \
  --entrypoint /usr/local/bin/winadmit --cmd serve \
  --exposed-ports 8443,9090 \
  --label org.opencontainers.image.title=winadmit \
  --label "org.opencontainers.image.description=Admission webhook and policy validator for Windows nodes in Kubernetes" \
  --label "org.opencontainers.image.version=$version" \
  --label "org.opencontainers.image.revision=$commit" \
  --label org.opencontainers.image.source=https://github.com/winadmit/winadmit \
  --label "io.winadmit.debian-packages=${pkgs% }" >/dev/null
digest="$("$crane" digest "$ref")"
echo "$ref@$digest"
