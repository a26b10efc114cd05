//! The provider configured from an ephemeral value, as `ephemeral "talos_cluster_kubeconfig"`
//! (siderolabs/talos 0.11+) gives it: an ephemeral variable holding the cluster's kubeconfig feeds
//! `kubeconfig_raw` (ephemeral values: OpenTofu 1.11+, Terraform 1.10+). A saved plan is applied
//! with the value given again (a plan file holds no ephemeral value), Cilium is installed, the
//! next plan is empty, and the kubeconfig's credentials are in no state or plan file.

use crate::harness::{REQUIRED_PROVIDERS, TestCluster, Workspace};
use crate::write_only::plan_file_contents;

/// The credential in a kubeconfig: its client key (or, without one, its token).
fn credential(kubeconfig: &str) -> String {
    kubeconfig
        .lines()
        .filter_map(|line| line.trim().split_once(':'))
        .find(|(key, _)| matches!(*key, "client-key-data" | "token"))
        .map(|(_, value)| value.trim().trim_matches('"').to_owned())
        .filter(|value| !value.is_empty())
        .unwrap_or_else(|| panic!("the kubeconfig holds no credential:\n{kubeconfig}"))
}

on_both_clis!(async an_ephemeral_kubeconfig_configures_the_provider_for_plan_and_apply);
async fn an_ephemeral_kubeconfig_configures_the_provider_for_plan_and_apply() {
    let cluster = TestCluster::start().await;
    let kubeconfig =
        std::fs::read_to_string(&cluster.kubeconfig_path).expect("read the kubeconfig");
    let credential = credential(&kubeconfig);
    let ws = Workspace::new(&format!(
        r#"{REQUIRED_PROVIDERS}
# What `ephemeral.talos_cluster_kubeconfig.this.kubeconfig_raw` is: ephemeral and sensitive.
variable "kubeconfig" {{
  type      = string
  sensitive = true
  ephemeral = true
}}

provider "talosboot" {{
  kubeconfig_raw = var.kubeconfig
}}

resource "talosboot_cilium" "this" {{
  version = "1.18.4"
}}

data "talosboot_helm_release" "cilium" {{
  name       = "cilium"
  namespace  = "kube-system"
  depends_on = [talosboot_cilium.this]
}}

output "status" {{
  value = data.talosboot_helm_release.cilium.status
}}
"#
    ))
    .env("TF_VAR_kubeconfig", &kubeconfig);
    ws.init();
    let plan = ws.ok(&["plan", "-no-color", "-input=false", "-out=tfplan"]);
    assert!(
        plan.stdout
            .contains("talosboot_cilium.this will be created"),
        "{}",
        plan.text()
    );
    let plan_file = plan_file_contents(&ws, "tfplan");
    let apply = ws.ok(&[
        "apply",
        "-auto-approve",
        "-no-color",
        "-input=false",
        "tfplan",
    ]);
    assert_eq!(
        ws.outputs()["status"]["value"],
        "deployed",
        "{}",
        apply.text()
    );
    assert!(!ws.plan_has_changes(), "the plan after the apply is empty");
    for (what, text) in [
        ("plan file", plan_file),
        ("state", ws.state_text()),
        ("plan output", plan.text()),
        ("apply output", apply.text()),
    ] {
        assert!(
            !text.contains(&credential),
            "the kubeconfig's credential is in the {what}"
        );
    }
}
