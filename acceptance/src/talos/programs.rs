//! What runs in a container, chosen by its image: a real program (Helm, with the host's `sh` and
//! `sed` as the image's userland; the Flux Operator, source-controller and kustomize-controller,
//! see [`flux_image`]) in a [`super::sandbox`], or an emulated one for images whose program
//! cannot run here (the Cilium agent, operator and Envoy, Hubble, Flux's helm-controller,
//! notification-controller and image automation controllers, Argo CD, `pause`), which acts
//! through the Kubernetes API like the real one.
//!
//! An image is known by its repository (tag and digest ignored, `docker.io/` and `library/`
//! normalized away, any registry host accepted so that mirrors work); an unknown one is an
//! image pull failure.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::watch;

use super::kubelet_logs::LogStore;
use super::network::{DialError, Endpoint};

/// How a container's process ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exit {
    pub code: i32,
    /// `StartError` when the runtime could not start it; `None`: `Completed`/`Error` by code.
    pub reason: Option<String>,
    pub message: Option<String>,
}

impl Exit {
    pub fn code(code: i32) -> Exit {
        Exit {
            code,
            reason: None,
            message: None,
        }
    }

    pub fn start_error(message: impl Into<String>) -> Exit {
        Exit {
            code: 128,
            reason: Some("StartError".into()),
            message: Some(message.into()),
        }
    }
}

pub type ProgramFuture = Pin<Box<dyn Future<Output = Exit> + Send>>;

/// The running container as an emulated program sees it.
#[derive(Clone)]
pub struct Container {
    pub pod: Arc<Pod>,
    pub name: String,
    /// An init container: it must finish for the pod to start.
    pub init: bool,
    pub image: String,
    pub argv: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub node: String,
    /// The API endpoint from the environment, and whether the pod can reach it.
    pub endpoint: Endpoint,
    pub reachable: Result<(), DialError>,
    /// A client acting as the pod's ServiceAccount (only when `reachable`).
    pub api: Option<kube::Client>,
    /// How long a dial to an unreachable address takes to time out.
    pub dial_timeout: Duration,
    pub(crate) logs: LogStore,
    pub(crate) ready: Arc<watch::Sender<bool>>,
}

impl Container {
    pub fn namespace(&self) -> &str {
        self.pod.metadata.namespace.as_deref().unwrap_or("default")
    }

    pub fn pod_name(&self) -> &str {
        self.pod.metadata.name.as_deref().unwrap_or("")
    }

    /// Writes a line to the container's log.
    pub fn out(&self, line: &str) {
        let mut text = line.to_owned();
        text.push('\n');
        self.logs.append(
            self.namespace(),
            self.pod_name(),
            &self.name,
            text.as_bytes(),
        );
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.send_replace(ready);
    }

    /// Connects as the program would: `Ok` with the client, or the dial error after the time the
    /// real client would wait for it.
    pub async fn dial(&self) -> Result<kube::Client, DialError> {
        match (&self.reachable, &self.api) {
            (Ok(()), Some(client)) => Ok(client.clone()),
            (Err(e), _) => {
                if e.is_timeout() {
                    tokio::time::sleep(self.dial_timeout).await;
                }
                Err(e.clone())
            }
            (Ok(()), None) => Err(DialError::Refused {
                addr: self.endpoint.to_string(),
            }),
        }
    }

    /// `Get "https://HOST:PORT/version"`: the request a client makes first.
    pub fn version_url(&self) -> String {
        format!("{}/version", self.endpoint.url())
    }

    /// A container value (`securityContext.capabilities.add`, ...) from the pod spec.
    pub fn spec(&self) -> Option<&k8s_openapi::api::core::v1::Container> {
        let spec = self.pod.spec.as_ref()?;
        spec.containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
            .find(|c| c.name == self.name)
    }
}

/// An emulated program.
pub trait Program: Send + Sync {
    fn run(&self, container: Container) -> ProgramFuture;
}

/// What an image is here.
#[derive(Clone)]
pub enum ImageKind {
    /// Real binaries: the host files mounted as `/usr/local/bin/NAME`, the image's `ENTRYPOINT`
    /// and `CMD`, and its `PATH`.
    Real {
        binaries: Vec<(std::path::PathBuf, String)>,
        entrypoint: Vec<String>,
        cmd: Vec<String>,
    },
    Emulated(Arc<dyn Program>),
}

/// The repository of an image reference, without registry host, tag or digest
/// (`quay.io/cilium/cilium:v1.18.4@sha256:...` → `cilium/cilium`; `alpine/helm:3.18.4` →
/// `alpine/helm`; `docker.io/library/busybox` → `busybox`).
pub fn repository(image: &str) -> String {
    let without_digest = image.split('@').next().unwrap_or(image);
    let (path, _) = match without_digest.rsplit_once(':') {
        Some((p, tag)) if !tag.contains('/') => (p, tag),
        _ => (without_digest, ""),
    };
    let mut parts: Vec<&str> = path.split('/').collect();
    if parts.len() > 1
        && (parts[0].contains('.') || parts[0].contains(':') || parts[0] == "localhost")
    {
        parts.remove(0);
    }
    if parts.first() == Some(&"library") {
        parts.remove(0);
    }
    parts.join("/")
}

/// The tag of an image reference (`""` when none).
pub fn tag(image: &str) -> &str {
    let without_digest = image.split('@').next().unwrap_or(image);
    match without_digest.rsplit_once(':') {
        Some((_, tag)) if !tag.contains('/') => tag,
        _ => "",
    }
}

/// The `/etc/os-release` of `gcr.io/distroless/static` (Debian 12), the base of the Flux
/// Operator's image: the operator's in-pod check wants `distroless` (by `ID` or `PRETTY_NAME`)
/// at `VERSION_ID` 12 or later, or `rhel` 8 or later.
pub const DISTROLESS_OS_RELEASE: &str = "PRETTY_NAME=\"Distroless\"\nNAME=\"Debian GNU/Linux\"\nID=\"debian\"\nVERSION_ID=\"12\"\nVERSION=\"Debian GNU/Linux 12 (bookworm)\"\nHOME_URL=\"https://github.com/GoogleContainerTools/distroless\"\nSUPPORT_URL=\"https://github.com/GoogleContainerTools/distroless/blob/master/README.md\"\nBUG_REPORT_URL=\"https://github.com/GoogleContainerTools/distroless/issues/new\"\n";

/// The images whose real programs are built into `tools.flux` (`scripts/install-tools.sh`), as
/// upstream's images run them:
/// - `controlplaneio-fluxcd/flux-operator` (flux-operator v0.59.0's Dockerfile: distroless
///   static, the binary at `/flux-operator`, `ENTRYPOINT ["/flux-operator"]`, `COPY config/data/
///   /data/`): `/flux-operator`, the Flux distribution the project writes
///   ([`super::flux_distribution`]) at `/data`, and distroless' `/etc/os-release`. FIPS mode is
///   the binary's own (built with `GOFIPS140=latest`, as upstream);
/// - `fluxcd/source-controller` at v1.9.5 (alpine, `/usr/local/bin/source-controller`, `ENTRYPOINT
///   ["source-controller"]`);
/// - `fluxcd/kustomize-controller` at v1.9.5 (alpine, `ENTRYPOINT ["/sbin/tini", "--",
///   "kustomize-controller"]`; run here without tini, which reaps zombies and forwards signals:
///   the process is PID 1 of nothing, it is killed by its process group).
///
/// [`FluxImage::Other`] for other images and other versions (the emulated ones,
/// [`super::emulated`]); [`FluxImage::NotBuilt`] for a version built here whose binary is missing
/// (never the emulation in its place: a suite would pass proving nothing about the real program).
/// `dir` is the cluster's folder, where the distribution is written once.
pub fn flux_image(image: &str, tools: &super::tools::Tools, dir: &std::path::Path) -> FluxImage {
    let repository = repository(image);
    let binary = |name: &str| {
        let path = tools.flux.join(name);
        if path.is_file() {
            Some(path)
        } else {
            tracing::warn!(binary = %path.display(), "the real {name} is not built (scripts/install-tools.sh): its image cannot be pulled");
            None
        }
    };
    match &*repository {
        // Only the version built here: an older operator image (the test charts 0.28.0 and
        // 0.33.0) is the emulated one (`super::emulated`).
        "controlplaneio-fluxcd/flux-operator" if runs_real_operator(tag(image)) => {
            let Some(operator) = binary("flux-operator") else {
                return FluxImage::NotBuilt;
            };
            let image = dir.join("images/flux-operator");
            let data = image.join("data");
            let os_release = image.join("os-release");
            let written = super::flux_distribution::write(&data, &tools.flux.join("crds"))
                .and_then(|()| std::fs::write(&os_release, DISTROLESS_OS_RELEASE));
            if let Err(e) = written {
                tracing::warn!(error = %e, "failed to write the flux-operator image's files");
                return FluxImage::NotBuilt;
            }
            FluxImage::Real(ImageKind::Real {
                binaries: vec![
                    (operator, "/flux-operator".into()),
                    (data, "/data".into()),
                    (os_release, "/etc/os-release".into()),
                ],
                entrypoint: vec!["/flux-operator".into()],
                cmd: vec![],
            })
        }
        // v1.9.5, as Flux 2.9.5 pins both; another version is the emulated controller.
        "fluxcd/source-controller" | "fluxcd/kustomize-controller"
            if matches!(tag(image), "" | "latest" | FLUX_CONTROLLERS_VERSION) =>
        {
            let name = repository.trim_start_matches("fluxcd/");
            match binary(name) {
                Some(path) => FluxImage::Real(ImageKind::Real {
                    binaries: vec![(path, name.to_owned())],
                    entrypoint: vec![name.to_owned()],
                    cmd: vec![],
                }),
                None => FluxImage::NotBuilt,
            }
        }
        _ => FluxImage::Other,
    }
}

/// What [`flux_image`] makes of an image.
pub enum FluxImage {
    /// A Flux program built here, at its version: it runs.
    Real(ImageKind),
    /// A version built here whose binary (or image files) is missing: the pull fails.
    NotBuilt,
    /// Not a Flux image built here (another version or component): emulated where the emulation
    /// knows it.
    Other,
}

/// The Flux Operator version built here (`scripts/install-tools.sh`).
pub const FLUX_OPERATOR_VERSION: &str = "v0.59.0";

/// The version of source-controller and kustomize-controller built here (Flux 2.9.5's).
pub const FLUX_CONTROLLERS_VERSION: &str = "v1.9.5";

/// Whether an operator image's tag is the version built here (or names none: `latest`, a
/// digest alone).
fn runs_real_operator(tag: &str) -> bool {
    tag.is_empty() || tag == "latest" || tag == FLUX_OPERATOR_VERSION
}

/// The Helm major an installer image carries, which decides the real Helm binary its pods run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HelmMajor {
    V3,
    V4,
}

impl HelmMajor {
    /// The major an image reference names. Images whose tag is Helm's version (`alpine/helm`,
    /// `dtzar/helm-kubectl`, any `*/helm`: `3.18.4`, `v4.3.2`, `4.3.2-alpine`) by its first
    /// number; `flux-operator-bootstrap`, whose tag is the module's version, carries Helm 4 (its
    /// image ships Helm 4.2.3, field notes §10); `cilium-cli` (a shim over Helm in the Helm SDK's
    /// place) stays on Helm 3 as its v0.18 builds do. Anything else (no tag, `latest`, a digest
    /// alone, a tag that is not a Helm version) is [`HelmMajor::DEFAULT`].
    pub fn of_image(image: &str) -> HelmMajor {
        let repository = repository(image);
        match repository.rsplit('/').next().unwrap_or(&repository) {
            "flux-operator-bootstrap" => return HelmMajor::V4,
            "cilium-cli" | "cilium-cli-ci" => return HelmMajor::V3,
            _ => {}
        }
        let version = tag(image).trim_start_matches('v');
        let major = version.split(['.', '-']).next().unwrap_or("");
        // A bare number is not a version (`alpine/helm:3` would be, but no such tag is published).
        match (major, version.contains('.')) {
            ("3", true) => HelmMajor::V3,
            ("4", true) => HelmMajor::V4,
            _ => HelmMajor::DEFAULT,
        }
    }

    /// For images that do not say: the major `latest` of the Helm images carries today.
    pub const DEFAULT: HelmMajor = HelmMajor::V4;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_installer_image_runs_the_helm_major_its_tag_names() {
        for (image, major) in [
            ("alpine/helm:3.18.4", HelmMajor::V3),
            ("docker.io/alpine/helm:3.18.4@sha256:abc", HelmMajor::V3),
            ("mirror.local:5000/alpine/helm:4.3.2", HelmMajor::V4),
            ("alpine/helm:v4.2.3", HelmMajor::V4),
            ("dtzar/helm-kubectl:3.18.4", HelmMajor::V3),
            ("example/helm:4.3.2-alpine", HelmMajor::V4),
            (
                "ghcr.io/controlplaneio-fluxcd/flux-operator-bootstrap:v0.8.0",
                HelmMajor::V4,
            ),
            ("quay.io/cilium/cilium-cli:v0.18.7", HelmMajor::V3),
            // No version in the reference: the documented default.
            ("alpine/helm", HelmMajor::DEFAULT),
            ("alpine/helm:latest", HelmMajor::DEFAULT),
            ("alpine/helm@sha256:abc", HelmMajor::DEFAULT),
            ("alpine/helm:3", HelmMajor::DEFAULT),
            ("alpine/helm:5.0.0", HelmMajor::DEFAULT),
        ] {
            assert_eq!(HelmMajor::of_image(image), major, "{image}");
        }
        assert_eq!(HelmMajor::DEFAULT, HelmMajor::V4);
    }

    #[test]
    fn the_flux_images_built_here_run_their_real_programs_at_their_versions() {
        let tools_dir = tempfile::tempdir().expect("tmp");
        let flux = tools_dir.path().join("flux");
        std::fs::create_dir_all(&flux).expect("dir");
        for name in ["flux-operator", "source-controller", "kustomize-controller"] {
            std::fs::write(flux.join(name), "").expect("binary");
        }
        let none = std::path::PathBuf::new();
        let tools = crate::talos::tools::Tools {
            etcd: none.clone(),
            kube_apiserver: none.clone(),
            kube_controller_manager: none.clone(),
            kube_scheduler: none.clone(),
            helm: none.clone(),
            helm4: none,
            flux,
        };
        let dir = tempfile::tempdir().expect("tmp");
        let real = |image: &str| match flux_image(image, &tools, dir.path()) {
            FluxImage::Real(kind) => Some(kind),
            _ => None,
        };
        let Some(ImageKind::Real {
            binaries,
            entrypoint,
            ..
        }) = real("ghcr.io/controlplaneio-fluxcd/flux-operator:v0.59.0")
        else {
            panic!("the operator at v0.59.0 is real");
        };
        assert_eq!(entrypoint, ["/flux-operator"]);
        let paths: Vec<&str> = binaries.iter().map(|(_, p)| p.as_str()).collect();
        assert_eq!(paths, ["/flux-operator", "/data", "/etc/os-release"]);
        assert!(binaries[1].0.join("flux-images/VERSION").is_file());
        let os = std::fs::read_to_string(&binaries[2].0).expect("os-release");
        assert!(os.contains("PRETTY_NAME=\"Distroless\"") && os.contains("VERSION_ID=\"12\""));
        assert!(real("ghcr.io/controlplaneio-fluxcd/flux-operator:v0.33.0").is_none());
        assert!(real("ghcr.io/fluxcd/source-controller:v1.9.5").is_some());
        assert!(real("ghcr.io/fluxcd/kustomize-controller:v1.9.5@sha256:a3").is_some());
        assert!(real("ghcr.io/fluxcd/source-controller:v1.7.0").is_none());
        assert!(real("ghcr.io/fluxcd/helm-controller:v1.6.4").is_none());
        // A version built here but missing from the tools: no image, never the emulation.
        for name in ["flux-operator", "source-controller"] {
            std::fs::remove_file(tools.flux.join(name)).expect("remove");
        }
        for image in [
            "ghcr.io/controlplaneio-fluxcd/flux-operator:v0.59.0",
            "ghcr.io/fluxcd/source-controller:v1.9.5",
        ] {
            assert!(
                matches!(flux_image(image, &tools, dir.path()), FluxImage::NotBuilt),
                "{image}"
            );
        }
        assert!(matches!(
            flux_image(
                "ghcr.io/controlplaneio-fluxcd/flux-operator:v0.33.0",
                &tools,
                dir.path()
            ),
            FluxImage::Other
        ));
    }

    #[test]
    fn repositories_ignore_registry_tag_and_digest() {
        assert_eq!(
            repository("quay.io/cilium/cilium:v1.18.4@sha256:abc"),
            "cilium/cilium"
        );
        assert_eq!(repository("alpine/helm:3.18.4"), "alpine/helm");
        assert_eq!(
            repository("mirror.local:5000/alpine/helm:3.18.4"),
            "alpine/helm"
        );
        assert_eq!(repository("docker.io/library/busybox"), "busybox");
        assert_eq!(tag("quay.io/cilium/cilium:v1.18.4@sha256:abc"), "v1.18.4");
        assert_eq!(tag("registry:5000/x"), "");
    }
}
