//! Where the real binaries are: `.tools/` at the repository root, as `scripts/install-tools.sh`
//! installs them, or the folder in `TALOSBOOT_TOOLS`.

use std::path::PathBuf;

/// The real programs a cluster runs.
#[derive(Clone, Debug)]
pub struct Tools {
    pub etcd: PathBuf,
    pub kube_apiserver: PathBuf,
    pub kube_controller_manager: PathBuf,
    pub kube_scheduler: PathBuf,
    /// Helm 3 (`scripts/helm-build`).
    pub helm: PathBuf,
    /// Helm 4 (`scripts/helm4-build`).
    pub helm4: PathBuf,
    /// The real Flux Operator and controllers and their generated CRDs (`flux-operator`,
    /// `source-controller`, `kustomize-controller`, `crds/*.yaml`), not required: an image whose
    /// program is missing there cannot be pulled.
    pub flux: PathBuf,
}

impl Tools {
    /// The installed tools, or an error naming the missing one and the script that installs it.
    pub fn find() -> anyhow::Result<Tools> {
        let root = root();
        let kube = root.join("kube");
        let tools = Tools {
            etcd: kube.join("etcd"),
            kube_apiserver: kube.join("kube-apiserver"),
            kube_controller_manager: kube.join("kube-controller-manager"),
            kube_scheduler: kube.join("kube-scheduler"),
            helm: root.join("helm/helm"),
            helm4: root.join("helm4/helm"),
            flux: root.join("flux"),
        };
        for path in [
            &tools.etcd,
            &tools.kube_apiserver,
            &tools.kube_controller_manager,
            &tools.kube_scheduler,
            &tools.helm,
            &tools.helm4,
        ] {
            if !path.is_file() {
                anyhow::bail!(
                    "{} is missing: run scripts/install-tools.sh (it builds the real control plane and Helm)",
                    path.display()
                );
            }
        }
        Ok(tools)
    }
}

/// The tools folder: `TALOSBOOT_TOOLS`, else `.tools/` at the repository root.
pub fn root() -> PathBuf {
    std::env::var_os("TALOSBOOT_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.tools"))
}
