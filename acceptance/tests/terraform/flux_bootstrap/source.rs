//! The cluster every Flux bootstrap test applies to: the real Flux Operator and controllers (the
//! node layer runs them for the versions built here), and the sync source they reconcile,
//! [`SOURCE`], served over SSH on loopback (`github.com` resolves to it inside the pods only)
//! with a deploy key the Git server accepts. The roots give that key as the pull secret's
//! Secret in `managed_resources.secrets_yaml`, read with `file()` from outside the workspace, so
//! no configuration snapshot or state holds it.

use std::ops::Deref;
use std::path::Path;

use talos_sim::talos::TalosConfig;

use crate::harness::TestCluster;

/// The Git source the bootstrap syncs.
pub(crate) const SOURCE: &str = "ssh://git@github.com/example/infra.git";
/// The sync path of the roots that do not choose one.
pub(crate) const SYNC_PATH: &str = "clusters/staging";
/// The sync path with every character the runtime substitution must keep as it is (the drift
/// test's `sync.path`).
pub(crate) const AWKWARD_PATH: &str =
    r#"kubernetes/clusters/staging "quoted" it's $HOME ${NOT_A_VAR}"#;
/// The sync path of `examples/quickstart`.
pub(crate) const QUICKSTART_PATH: &str = "kubernetes/clusters/demo";
/// The deploy key's Secret in `flux-system`: the sync's `pullSecret`.
pub(crate) const DEPLOY_KEY_SECRET: &str = "flux-git";

/// A fresh ed25519 key pair in `dir`: (private key, public `authorized_keys` line).
pub(crate) fn deploy_key(dir: &Path) -> (String, String) {
    let path = dir.join("deploy");
    let status = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "deploy", "-f"])
        .arg(&path)
        .status()
        .expect("ssh-keygen");
    assert!(status.success(), "ssh-keygen failed");
    (
        std::fs::read_to_string(&path).expect("private key"),
        std::fs::read_to_string(path.with_extension("pub")).expect("public key"),
    )
}

/// The repository: at each sync path a ConfigMap `synced` in `default` (naming its path) that
/// kustomize-controller applies once it has the source.
fn write_repository(dir: &Path) {
    for path in [SYNC_PATH, AWKWARD_PATH, QUICKSTART_PATH] {
        let at = dir.join(path);
        std::fs::create_dir_all(&at).expect("mkdir");
        let configmap = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "synced", "namespace": "default"},
            "data": {"path": path},
        });
        std::fs::write(at.join("synced.yaml"), configmap.to_string()).expect("write");
    }
}

/// The cluster with [`SOURCE`] served and the deploy key's files; derefs to the cluster.
pub(crate) struct FluxCluster {
    cluster: TestCluster,
    dir: tempfile::TempDir,
}

impl Deref for FluxCluster {
    type Target = TestCluster;

    fn deref(&self) -> &TestCluster {
        &self.cluster
    }
}

impl FluxCluster {
    /// A fresh cluster of the default settings with the source served. `None` (with a message)
    /// on an external cluster, where no loopback Git server can serve it.
    pub(crate) async fn start() -> Option<FluxCluster> {
        FluxCluster::start_with(TalosConfig::default()).await
    }

    /// [`Self::start`] with other settings.
    pub(crate) async fn start_with(mut config: TalosConfig) -> Option<FluxCluster> {
        let dir = tempfile::tempdir().expect("tempdir");
        let repository = dir.path().join("infra");
        write_repository(&repository);
        config.git.repositories.push((SOURCE.into(), repository));
        let cluster = TestCluster::start_with(config).await;
        let Some(git) = cluster.git() else {
            eprintln!("skipped: the Flux bootstrap's Git source needs the embedded cluster");
            return None;
        };
        let (_, public) = deploy_key(dir.path());
        git.authorize(&public).expect("authorize the deploy key");
        std::fs::write(dir.path().join("known_hosts"), git.known_hosts()).expect("known_hosts");
        Some(FluxCluster { cluster, dir })
    }

    /// The deploy key the Git server accepts (OpenSSH private key), as a user's variable gets it.
    pub(crate) fn deploy_private_key(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("deploy")).expect("the deploy key")
    }

    /// The deploy key's public half (its `authorized_keys` line), to revoke and authorize it again
    /// at the Git server (the chaos run's refusing Git server).
    pub(crate) fn deploy_public_key(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("deploy.pub")).expect("the deploy key")
    }

    /// The Git host's `known_hosts` line (`github.com ...`), as the quickstart's `known_hosts`.
    pub(crate) fn known_hosts_line(&self) -> String {
        let all =
            std::fs::read_to_string(self.dir.path().join("known_hosts")).expect("known_hosts");
        all.lines()
            .find(|l| l.starts_with("github.com "))
            .expect("a github.com line")
            .to_owned()
    }

    /// The deploy key's Secret as an HCL expression for `managed_resources.secrets_yaml` (or an
    /// element of a list joined into it).
    pub(crate) fn deploy_key_secret(&self) -> String {
        format!(
            r#"yamlencode({{ apiVersion = "v1", kind = "Secret", metadata = {{ name = "{DEPLOY_KEY_SECRET}" }}, stringData = {{ identity = file("{}"), known_hosts = file("{}") }} }})"#,
            self.dir.path().join("deploy").display(),
            self.dir.path().join("known_hosts").display(),
        )
    }
}
