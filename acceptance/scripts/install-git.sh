#!/bin/sh
# Installs Debian's git and openssh-client when the machine lacks them: the loopback Git server
# (talos-sim serve --git-repository) serves repositories the system git writes, through the
# system git-upload-pack, and the demo and the real-Flux tests make deploy keys with ssh-keygen.
# Idempotent; used by scripts/test and scripts/demo.
set -eu
if command -v git >/dev/null && command -v ssh-keygen >/dev/null; then
    exit 0
fi
if ! apt-get install -y --no-install-recommends git openssh-client >/dev/null; then
    echo "apt-get install failed; trying apt-get update first" >&2
    apt-get update -qq
    apt-get install -y --no-install-recommends git openssh-client >/dev/null
fi
