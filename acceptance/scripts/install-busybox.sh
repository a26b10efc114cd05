#!/bin/sh
# Installs Debian's busybox-static into acceptance/.work/busybox/ WITHOUT touching the system:
# `apt-get download` + `dpkg -x`. The node layer runs it as `sh`, `sed` and the other applets of
# Alpine-based images (alpine/helm's shell is busybox ash, which has `set -o pipefail`; the
# machine's dash does not). Idempotent.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
dest="$here/.work/busybox"
bin="$dest/bin/busybox"
if [ -x "$bin" ]; then
    echo "busybox already installed: $bin"
    exit 0
fi
mkdir -p "$dest"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
if ! apt-get download busybox-static; then
    echo "apt-get download failed; trying apt-get update first" >&2
    apt-get update -qq
    apt-get download busybox-static
fi
dpkg -x busybox-static_*.deb "$dest"
test -x "$bin"
echo "installed: $bin"
