#!/bin/sh
# Installs Debian's kubernetes-client (kubectl 1.20) into acceptance/.work/kubectl/ WITHOUT touching
# the system kubectl: `apt-get download` + `dpkg -x`. Idempotent: does nothing when already present.
# The kubectl compatibility test finds the binary at $TALOSBOOT_KUBECTL or
# acceptance/.work/kubectl/usr/bin/kubectl.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
dest="$here/.work/kubectl"
bin="$dest/usr/bin/kubectl"
if [ -x "$bin" ]; then
    echo "kubectl already installed: $bin"
    exit 0
fi
mkdir -p "$dest"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
if ! apt-get download kubernetes-client; then
    echo "apt-get download failed; trying apt-get update first" >&2
    apt-get update -qq
    apt-get download kubernetes-client
fi
dpkg -x kubernetes-client_*.deb "$dest"
test -x "$bin"
echo "installed: $bin ($("$bin" version --client --short 2>/dev/null || true))"
