//! Programs the simulated kubelet runs in containers, selected by image and command.
//!
//! A container image is known to the [`ProgramRegistry`] by its repository (tag and digest
//! ignored, `docker.io/library/` normalized away): the [`Image`] says which commands exist in it,
//! its `ENTRYPOINT` and `CMD`. The container's argv follows Kubernetes' rule (`command` replaces
//! ENTRYPOINT, `args` replaces CMD); its first word (basename) picks the [`Program`]. An unknown image is an
//! image pull failure (`ErrImagePull`, then `ImagePullBackOff`); a command missing from a known
//! image is a container start failure (`exec: "sh": executable file not found in $PATH`), as
//! with the distroless `cilium-cli` image.
//!
//! Programs that "reach" the API act on the cluster through the in-process
//! [`Store`](crate::store::Store) API: that is the simulation. Whether they may reach it at all is decided first, exactly as documented
//! in [`crate::cluster::network`], from the endpoint their environment points them at
//! ([`ProgramContext::dial_api`]).
//!
//! Built-in programs: `sh` (busybox/alpine subset with pipelines, `sed` and `grep`: [`shell`]),
//! `helm` ([`helm`]), `kubectl`
//! (a subset: [`kubectl`]), `cilium` (cilium-cli: [`cilium`]), the Cilium agent and operator,
//! Envoy, Hubble relay and UI, the cluster-mesh API server, kube-proxy, Flux controllers and the
//! Flux Operator ([`daemons`], [`flux_operator`]), `pause`.

pub mod charts;
pub mod cilium;
mod context;
pub mod daemons;
pub mod files;
pub mod flags;
pub mod flux_operator;
pub mod helm;
mod helm_flags;
mod helm_read;
mod helm_template;
pub mod kubectl;
pub mod manifests;
pub mod release;
pub mod shell;
mod shell_builtins;
mod shell_syntax;
mod text_filters;
pub mod values;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

pub use context::{Capture, ProgramContext};

/// How a program ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exit {
    pub code: i32,
    /// Container state reason override (`StartError`); `None` = `Completed`/`Error` by code.
    pub reason: Option<String>,
    /// `state.terminated.message` (the termination message).
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

    pub fn ok() -> Exit {
        Exit::code(0)
    }

    /// The runtime could not start the process (exit code 128, reason `StartError`).
    pub fn start_error(message: impl Into<String>) -> Exit {
        Exit {
            code: 128,
            reason: Some("StartError".into()),
            message: Some(message.into()),
        }
    }

    /// Whether the runtime failed to start the process (reason `StartError`).
    pub fn is_start_error(&self) -> bool {
        self.reason.as_deref() == Some("StartError")
    }
}

/// A boxed program run.
pub type ProgramFuture = Pin<Box<dyn Future<Output = Exit> + Send + 'static>>;

/// An emulated executable. `run` is dropped when the container is killed: no cleanup needed.
pub trait Program: Send + Sync + 'static {
    fn run(&self, ctx: ProgramContext) -> ProgramFuture;
}

impl<F, Fut> Program for F
where
    F: Fn(ProgramContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Exit> + Send + 'static,
{
    fn run(&self, ctx: ProgramContext) -> ProgramFuture {
        Box::pin(self(ctx))
    }
}

/// What an image contains.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    /// `ENTRYPOINT`: used when the container has no `command`.
    pub entrypoint: Vec<String>,
    /// `CMD`: used when the container has neither `command` nor `args`.
    pub cmd: Vec<String>,
    /// Commands (basenames) present in the image.
    pub commands: Vec<String>,
    /// A program that runs every command of this image (an image with its own behaviour,
    /// e.g. the Cilium agent image and its init containers); `None` = by command.
    pub handler: Option<String>,
}

impl Image {
    pub fn has(&self, command: &str) -> bool {
        self.commands.iter().any(|c| c == command)
    }
}

/// Images and programs, keyed by repository and by command. Cheap to clone.
#[derive(Clone, Default)]
pub struct ProgramRegistry {
    images: HashMap<String, Image>,
    /// Images by a word in the repository's last path segment (`helm` → `alpine/helm`, ...).
    families: Vec<(String, Image)>,
    programs: HashMap<String, Arc<dyn Program>>,
}

impl std::fmt::Debug for ProgramRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut images: Vec<&String> = self.images.keys().collect();
        images.sort();
        f.debug_struct("ProgramRegistry")
            .field("images", &images)
            .finish_non_exhaustive()
    }
}

const SHELL: &[&str] = &[
    "sh", "ash", "bash", "echo", "sleep", "true", "false", "cat", "env", "sed", "grep",
];

impl ProgramRegistry {
    /// An empty registry: every image fails to pull.
    pub fn empty() -> Self {
        Self::default()
    }

    /// The images and programs of the simulated Talos cluster (see the module docs).
    pub fn builtin() -> Self {
        let mut r = Self::empty();
        for repo in ["busybox", "alpine", "debian", "ubuntu", "bash"] {
            r.add_image(repo, &[], SHELL);
            r.set_cmd(repo, &["sh"]);
        }
        let helm_tools: Vec<&str> = SHELL.iter().copied().chain(["helm", "kubectl"]).collect();
        r.add_image(
            "ghcr.io/controlplaneio-fluxcd/flux-operator-bootstrap",
            &["helm"],
            &helm_tools,
        );
        r.add_image("alpine/helm", &["helm"], &helm_tools);
        r.add_image("dtzar/helm-kubectl", &["sh"], &helm_tools);
        r.add_image("quay.io/cilium/cilium-cli", &["cilium"], &["cilium"]);
        r.add_image("quay.io/cilium/cilium-cli-ci", &["cilium"], &["cilium"]);
        r.add_image(
            "quay.io/cilium/cilium",
            &["cilium-agent"],
            &[
                "cilium-agent",
                "cilium-dbg",
                "sh",
                "bash",
                "init-container.sh",
                "install-plugin.sh",
            ],
        );
        r.set_handler("quay.io/cilium/cilium", "cilium-image");
        r.add_image(
            "quay.io/cilium/operator-generic",
            &["cilium-operator-generic"],
            &["cilium-operator-generic"],
        );
        r.add_cilium_components();
        r.add_image(
            "registry.k8s.io/kube-proxy",
            &["/usr/local/bin/kube-proxy"],
            &["kube-proxy"],
        );
        r.add_program(
            "kube-proxy",
            daemons::Component {
                started: "I0101 00:00:00.000000       1 server_linux.go:66] \"Using iptables proxy\"",
                needs_api: false,
            },
        );
        r.add_image(
            "ghcr.io/controlplaneio-fluxcd/flux-operator",
            &["flux-operator"],
            &["flux-operator"],
        );
        for c in [
            "source-controller",
            "kustomize-controller",
            "helm-controller",
            "notification-controller",
            "image-reflector-controller",
            "image-automation-controller",
        ] {
            r.add_image(&format!("ghcr.io/fluxcd/{c}"), &[c], &[c]);
            r.add_program(c, daemons::Controller);
        }
        r.add_image("registry.k8s.io/pause", &["pause"], &["pause"]);
        for c in SHELL {
            r.add_program(c, shell::Shell);
        }
        r.add_program("helm", helm::Helm);
        r.add_program("kubectl", kubectl::Kubectl);
        r.add_family("helm", &["helm"], &helm_tools);
        r.add_image("bitnami/kubectl", &["kubectl"], &helm_tools);
        r.add_image("registry.k8s.io/kubectl", &["kubectl"], &["kubectl"]);
        r.add_program("cilium", cilium::CiliumCli);
        r.add_program("pause", daemons::Pause);
        r.add_program("cilium-operator-generic", daemons::CiliumOperator);
        r.add_program("flux-operator", flux_operator::FluxOperator);
        r.add_program("cilium-image", daemons::CiliumAgentImage);
        r
    }

    /// The images of Cilium's other components, each run by a [`daemons::Component`] (their
    /// repositories as the chart defaults them; the tag does not matter to the registry).
    fn add_cilium_components(&mut self) {
        let components: [(&str, &[&str], &str, &str, bool); 4] = [
            (
                "quay.io/cilium/cilium-envoy",
                &["cilium-envoy-starter", "cilium-envoy"],
                "cilium-envoy",
                "[info][main] [source/server/server.cc:960] all clusters initialized. initializing init manager",
                false,
            ),
            (
                "quay.io/cilium/hubble-relay",
                &["hubble-relay"],
                "hubble-relay",
                "level=info msg=\"Starting gRPC server...\" subsys=hubble-relay",
                false,
            ),
            (
                "quay.io/cilium/hubble-ui",
                &["nginx"],
                "hubble-ui",
                "nginx: start worker processes",
                false,
            ),
            (
                "quay.io/cilium/hubble-ui-backend",
                &["backend"],
                "hubble-ui-backend",
                "level=info msg=\"listening on :8090\" subsys=ui-backend",
                true,
            ),
        ];
        for (repository, commands, program, started, needs_api) in components {
            self.add_image(repository, &commands[..1], commands);
            self.set_handler(repository, program);
            self.add_program(program, daemons::Component { started, needs_api });
        }
        let clustermesh = "quay.io/cilium/clustermesh-apiserver";
        self.add_image(
            clustermesh,
            &["clustermesh-apiserver"],
            &["clustermesh-apiserver", "etcd"],
        );
        self.set_handler(clustermesh, "clustermesh-image");
        self.add_program("clustermesh-image", daemons::ClusterMeshImage);
    }

    /// Makes `repository` pullable: `entrypoint` runs when a container has no `command`.
    pub fn add_image(&mut self, repository: &str, entrypoint: &[&str], commands: &[&str]) {
        let image = Image {
            entrypoint: entrypoint.iter().map(|s| s.to_string()).collect(),
            commands: commands.iter().map(|s| s.to_string()).collect(),
            cmd: Vec::new(),
            handler: None,
        };
        self.images.insert(repository_of(repository), image);
    }

    /// Makes every repository whose last path segment contains `word` an image like this one
    /// (checked after exact repositories).
    pub fn add_family(&mut self, word: &str, entrypoint: &[&str], commands: &[&str]) {
        let image = Image {
            entrypoint: entrypoint.iter().map(|s| s.to_string()).collect(),
            commands: commands.iter().map(|s| s.to_string()).collect(),
            cmd: Vec::new(),
            handler: None,
        };
        self.families.push((word.to_string(), image));
    }

    /// Sets the image's `CMD`.
    pub fn set_cmd(&mut self, repository: &str, cmd: &[&str]) {
        if let Some(image) = self.images.get_mut(&repository_of(repository)) {
            image.cmd = cmd.iter().map(|s| s.to_string()).collect();
        }
    }

    /// Makes `program` run every command of `repository`'s image.
    pub fn set_handler(&mut self, repository: &str, program: &str) {
        if let Some(image) = self.images.get_mut(&repository_of(repository)) {
            image.handler = Some(program.to_string());
        }
    }

    /// Registers the program run for `command` (a basename such as `helm`).
    pub fn add_program(&mut self, command: &str, program: impl Program) {
        self.programs.insert(command.to_string(), Arc::new(program));
    }

    /// The image for a reference such as `quay.io/cilium/cilium-cli:v0.18.7@sha256:...`.
    pub fn image(&self, reference: &str) -> Option<&Image> {
        let repo = repository_of(reference);
        let last = basename(&repo).to_string();
        self.images.get(&repo).or_else(|| {
            self.families
                .iter()
                .find(|(w, _)| last.contains(w.as_str()))
                .map(|(_, i)| i)
        })
    }

    /// The program that runs `argv0` in `image`: the image's handler, or the program registered
    /// for the command; `None` when the image has no such command.
    pub fn resolve(&self, image: &Image, argv0: &str) -> Option<Arc<dyn Program>> {
        if !image.has(basename(argv0)) {
            return None;
        }
        match &image.handler {
            Some(h) => self.program(h),
            None => self.program(argv0),
        }
    }

    /// The program for `command` (basename taken).
    pub fn program(&self, command: &str) -> Option<Arc<dyn Program>> {
        self.programs.get(basename(command)).cloned()
    }
}

/// `/usr/local/bin/helm` → `helm`.
pub fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The repository of an image reference, normalized: `docker.io/library/busybox:1.36` →
/// `busybox`, `quay.io/cilium/cilium@sha256:..` → `quay.io/cilium/cilium`.
pub fn repository_of(reference: &str) -> String {
    let no_digest = reference.split('@').next().unwrap_or(reference);
    let repo = match no_digest.rfind(':') {
        Some(i) if !no_digest[i..].contains('/') => &no_digest[..i],
        _ => no_digest,
    };
    let repo = repo
        .strip_prefix("docker.io/")
        .or_else(|| repo.strip_prefix("index.docker.io/"))
        .unwrap_or(repo);
    repo.strip_prefix("library/").unwrap_or(repo).to_string()
}

/// The fully qualified reference containerd pulls: `busybox` → `docker.io/library/busybox:latest`.
pub fn qualified_reference(reference: &str) -> String {
    let first = reference.split('/').next().unwrap_or("");
    let has_domain = reference.contains('/')
        && (first.contains('.') || first.contains(':') || first == "localhost");
    let mut out = if has_domain {
        reference.to_string()
    } else if reference.contains('/') {
        format!("docker.io/{reference}")
    } else {
        format!("docker.io/library/{reference}")
    };
    let last = out.rsplit('/').next().unwrap_or("");
    if !last.contains(':') && !out.contains('@') {
        out.push_str(":latest");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_image_references() {
        assert_eq!(repository_of("docker.io/library/busybox:1.36"), "busybox");
        assert_eq!(
            repository_of("quay.io/cilium/cilium:v1.18.4@sha256:abc"),
            "quay.io/cilium/cilium"
        );
        assert_eq!(repository_of("localhost:5000/x"), "localhost:5000/x");
        assert_eq!(qualified_reference("nope"), "docker.io/library/nope:latest");
        assert_eq!(qualified_reference("ghcr.io/a/b:v1"), "ghcr.io/a/b:v1");
        let r = ProgramRegistry::builtin();
        assert!(r.image("busybox:1.36").is_some_and(|i| i.has("sh")));
        assert!(
            r.image("quay.io/cilium/cilium-cli:v0.18.7")
                .is_some_and(|i| !i.has("sh"))
        );
        assert!(r.image("example.com/unknown").is_none());
        for component in [
            "quay.io/cilium/cilium-envoy:v1.34.10",
            "quay.io/cilium/hubble-relay:v1.18.4",
            "quay.io/cilium/hubble-ui:v0.13.2",
            "quay.io/cilium/hubble-ui-backend:v0.13.2",
            "quay.io/cilium/clustermesh-apiserver:v1.18.4",
            "registry.k8s.io/kube-proxy:v1.33.0",
        ] {
            assert!(r.image(component).is_some(), "{component} is known");
        }
        assert!(
            r.image("quay.io/cilium/cilium-envoy-broken:v1").is_none(),
            "a typo in a repository is an unknown image"
        );
        assert!(
            r.image("docker.io/bitnami/helm:3")
                .is_some_and(|i| i.has("helm"))
        );
    }
}
