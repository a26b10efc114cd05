#!/usr/bin/env bash
# Manual check of .tools/flux/git-server (README.md): clones with an authorized key, refuses another key
# and another user, reads the key files again at each login, exits 0 on SIGTERM. Needs git, ssh, ssh-keygen.
# Usage: scripts/flux-build/git-server/check.sh [PATH-TO-git-server]
set -euo pipefail
bin=${1:-$(cd "$(dirname "$0")/../../.." && pwd)/.tools/flux/git-server}
t=$(mktemp -d); trap 'kill $pid 2>/dev/null; rm -rf "$t"' EXIT
ssh-keygen -q -t ed25519 -N '' -f "$t/good"; ssh-keygen -q -t ed25519 -N '' -f "$t/bad"; ssh-keygen -q -t ecdsa -N '' -f "$t/host"
mkdir -p "$t/root/owner" "$t/work"
git -C "$t/work" init -q -b main && echo hi > "$t/work/f" && git -C "$t/work" add f && git -C "$t/work" -c user.name=t -c user.email=t@t commit -qm one
git clone -q --bare "$t/work" "$t/root/owner/repo.git"
"$bin" --root "$t/root" --authorized-key "$t/good.pub" --host-key "$t/host" >"$t/out" 2>"$t/err" & pid=$!
for i in $(seq 50); do [ -s "$t/out" ] && break; sleep 0.1; done
read -r word addr ktype kb64 <"$t/out"; echo "line: $word $addr $ktype ${kb64:0:16}..."
[ "$ktype $kb64" = "$(cut -d' ' -f1,2 "$t/host.pub")" ] && echo "host key matches"
port=${addr##*:}
echo "[127.0.0.1]:$port $ktype $kb64" >"$t/known_hosts"
ssh_cmd() { echo "ssh -i $1 -o IdentitiesOnly=yes -o UserKnownHostsFile=$t/known_hosts -o StrictHostKeyChecking=yes -o BatchMode=yes"; }
GIT_SSH_COMMAND=$(ssh_cmd "$t/good") git clone -q "ssh://git@127.0.0.1:$port/owner/repo" "$t/c1" && echo "clone with good key (no .git): $(cat "$t/c1/f")"
GIT_SSH_COMMAND=$(ssh_cmd "$t/good") git clone -q "ssh://git@127.0.0.1:$port/owner/repo.git" "$t/c2" && echo "clone with good key (.git): ok"
if GIT_SSH_COMMAND=$(ssh_cmd "$t/bad") git clone -q "ssh://git@127.0.0.1:$port/owner/repo.git" "$t/c3" 2>"$t/bad.err"; then echo "BAD KEY ACCEPTED"; exit 1; else echo "bad key refused: $(head -1 "$t/bad.err")"; fi
if GIT_SSH_COMMAND=$(ssh_cmd "$t/good") git clone -q "ssh://other@127.0.0.1:$port/owner/repo.git" "$t/c4" 2>"$t/user.err"; then echo "OTHER USER ACCEPTED"; exit 1; else echo "other user refused: $(head -1 "$t/user.err")"; fi
# keys read again at each login
cat "$t/bad.pub" >>"$t/good.pub"
GIT_SSH_COMMAND=$(ssh_cmd "$t/bad") git clone -q "ssh://git@127.0.0.1:$port/owner/repo.git" "$t/c5" && echo "bad key accepted once added to the file"
kill -TERM $pid; wait $pid; echo "exit after SIGTERM: $?"
grep -c . "$t/err" | sed 's/^/stderr lines: /'; grep -a refused "$t/err" | head -2
