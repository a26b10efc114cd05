#!/usr/bin/env bash
# Installs what scripts/release needs to cross-build the provider for every registry platform, and
# what scripts/test-release needs to check the result. Everything lands in .tools/release/:
#
#   rustup targets        the standard libraries of the five release targets (`rustup target add`,
#                         into the rustup home: rustup keeps them per toolchain)
#   .tools/release/venv   a Python venv with ziglang (Zig: the C compiler and linker for every target,
#                         macOS and Windows included) and cargo-zigbuild (drives cargo with it), both
#                         pinned below, from PyPI
#   .tools/release/qemu/usr/bin/qemu-aarch64-static, .tools/release/qemu/usr/aarch64-linux-gnu/lib
#                         Debian's qemu-user-static and the arm64 glibc and libgcc of its cross
#                         toolchains, unpacked with `dpkg -x` (not installed into /usr), to run the
#                         linux_arm64 binary in scripts/test-release
#
# Idempotent and safe to run concurrently (flock): each part is skipped when it is present at the
# pinned version, so a warm run costs a second. `--build-only` skips what only the tests need (qemu).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tools="$root/.tools/release"
mkdir -p "$tools"

# Pinned versions (bump here; the stamp files below make a bump reinstall).
ziglang_version=0.17.1
zigbuild_version=0.24.1

targets=(x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu x86_64-apple-darwin aarch64-apple-darwin x86_64-pc-windows-gnu)

install_targets() {
  local installed missing=()
  installed=$(rustup target list --installed)
  for t in "${targets[@]}"; do
    grep -qx "$t" <<<"$installed" || missing+=("$t")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "install-release-tools: rustup target add ${missing[*]}" >&2
  rustup target add "${missing[@]}" >&2
}

venv_is() {
  [ -x "$tools/venv/bin/cargo-zigbuild" ] && [ -x "$tools/venv/bin/python-zig" ] \
    && [ "$(cat "$tools/venv/.versions" 2>/dev/null)" = "ziglang==$ziglang_version cargo-zigbuild==$zigbuild_version" ]
}
install_venv() {
  venv_is && return 0
  local start=$SECONDS
  echo "install-release-tools: installing ziglang $ziglang_version and cargo-zigbuild $zigbuild_version into $tools/venv" >&2
  # Built in place (a venv's scripts name its path); the stamp, written last, marks it complete.
  rm -rf "$tools/venv"
  python3 -m venv "$tools/venv"
  "$tools/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "ziglang==$ziglang_version" "cargo-zigbuild==$zigbuild_version" >&2
  echo "ziglang==$ziglang_version cargo-zigbuild==$zigbuild_version" >"$tools/venv/.versions"
  venv_is || { echo "install-release-tools: $tools/venv is incomplete" >&2; return 1; }
  echo "install-release-tools: installed the venv in $((SECONDS - start)) s" >&2
}

# qemu and the arm64 glibc it runs the linux_arm64 binary with (-L .tools/release/qemu/usr/aarch64-linux-gnu):
# Debian packages unpacked with dpkg -x, none installed into the system.
qemu_debs=(qemu-user-static libc6-arm64-cross libgcc-s1-arm64-cross)
qemu_is() {
  [ -x "$tools/qemu/usr/bin/qemu-aarch64-static" ] && [ -e "$tools/qemu/usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1" ] \
    && [ "$(cat "$tools/qemu/.debs" 2>/dev/null)" = "${qemu_debs[*]}" ] \
    && "$tools/qemu/usr/bin/qemu-aarch64-static" --version >/dev/null 2>&1
}
install_qemu() {
  qemu_is && return 0
  echo "install-release-tools: unpacking Debian's ${qemu_debs[*]} into $tools/qemu" >&2
  local tmp deb
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  chmod 755 "$tmp" # apt's download user reads it
  (cd "$tmp" && { apt-get -o APT::Sandbox::User=root download "${qemu_debs[@]}" >&2 || { apt-get update -qq && apt-get -o APT::Sandbox::User=root download "${qemu_debs[@]}" >&2; }; })
  rm -rf "$tools/qemu.partial"
  for deb in "$tmp"/*.deb; do dpkg -x "$deb" "$tools/qemu.partial"; done
  echo "${qemu_debs[*]}" >"$tools/qemu.partial/.debs"
  rm -rf "$tools/qemu"
  mv "$tools/qemu.partial" "$tools/qemu"
  qemu_is || { echo "install-release-tools: $tools/qemu/usr/bin/qemu-aarch64-static does not run" >&2; return 1; }
}

(
  flock 9
  install_targets
  install_venv
  [ "${1:-}" = "--build-only" ] && exit 0
  install_qemu
) 9>"$tools/.lock"
