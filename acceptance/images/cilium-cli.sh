#!/bin/sh
# The `cilium` CLI of the quay.io/cilium/cilium-cli image, as talos-sim's node layer runs it:
# cilium-cli's Helm mode is the Helm SDK with the Cilium chart, so `install`, `upgrade` and
# `uninstall` are the real Helm with the chart from its repository. Flags are cilium-cli's
# (`--version`, `--set`, `--set-string`, `--values`, `--namespace`, `--wait`); others fail as
# cobra does.
set -eu
sub=${1:-}
[ $# -gt 0 ] && shift
namespace=kube-system
version=""
args=""
quote() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --version=*) version=${1#--version=} ;;
    --version) version=$2; shift ;;
    --namespace=*|-n=*) namespace=${1#*=} ;;
    --namespace|-n) namespace=$2; shift ;;
    --set=*|--set-string=*|--values=*|-f=*) args="$args $(quote "$1")" ;;
    --set|--set-string|--values|-f) args="$args $(quote "$1") $(quote "$2")"; shift ;;
    --wait) args="$args --wait" ;;
    --wait-duration=*) args="$args --timeout=${1#--wait-duration=}" ;;
    --context=*|--helm-release-name=*) ;;
    *) echo "Error: unknown flag: $1" >&2; exit 1 ;;
  esac
  shift
done
case "$sub" in
  version)
    echo "cilium-cli: v0.18.7 compiled with go1.24 on linux/amd64"
    echo "cilium image (default): v${version:-1.18.4}"
    ;;
  install|upgrade)
    [ -n "$version" ] && args="$args --version $(quote "${version#v}")"
    echo "ℹ️  Using Cilium version ${version:-1.18.4}"
    eval helm upgrade --install cilium cilium --repo https://helm.cilium.io --namespace "$namespace" "$args"
    ;;
  uninstall)
    helm uninstall cilium --namespace "$namespace"
    ;;
  *)
    echo "Error: unknown command \"$sub\" for \"cilium\"" >&2
    exit 1
    ;;
esac
