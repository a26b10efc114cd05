//! `examples/talos-cilium-flux` applied (not only planned) against the real Flux Operator and
//! Flux's real source-controller and kustomize-controller, with real Git over SSH: the seeds'
//! staging bootstrap and their phase-3 rebuild (from the read-only backup, applications
//! suspended). The repository Flux syncs is served on loopback as `github.com` and as the backup
//! host, inside the pods only; the deploy key is a fresh one the Git server accepts, given as the
//! root's ephemeral variable, so source-controller clones with the Secret the provider wrote.
//!
//! Only what cannot run here is swapped: `talos.tf` (siderolabs/talos) is left out and the
//! kubeconfig is given in its place, and `flux_known_hosts` names the loopback servers' host keys
//! (GitHub's real key cannot be served). helm-controller, in the example's components, is
//! emulated (no program for it is built: `acceptance/README.md`).

use std::path::Path;
use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use serde_json::{Value as Json, json};
use talos_sim::talos::TalosConfig;
use talos_sim::talos::git::GitConfig;

use super::{planned_skip, read, root_workspace};
use crate::flux_bootstrap::{api, configmaps, deploy_key, get, instances, wait_for};
use crate::harness::{TestCluster, Workspace};

const GITHUB: &str = "ssh://git@github.com/example/infra.git";
const BACKUP: &str = "ssh://git@backup.example.internal/srv/git/infra.git";
const GIT_REPOSITORY: (&str, &str, &str) = ("source.toolkit.fluxcd.io", "v1", "GitRepository");
const KUSTOMIZATION: (&str, &str, &str) = ("kustomize.toolkit.fluxcd.io", "v1", "Kustomization");

/// The repository as the seeds lay it out: per cluster the FluxInstance (the example's own file,
/// which Flux then owns) and an `apps` Kustomization that a rebuild starts suspended.
fn write_fleet(dir: &Path) {
    let instance = read(&super::examples().join("talos-cilium-flux/flux/flux-instance.yaml"));
    let apps = r#"apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: apps
  namespace: flux-system
spec:
  interval: 10m
  path: ./kubernetes/apps
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
  suspend: ${FLUX_SUSPEND_APPLICATIONS:=false}
"#;
    let app = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hello\n  namespace: default\ndata:\n  greeting: from-git\n";
    for (path, text) in [
        (
            "kubernetes/clusters/staging/flux-system/flux-instance.yaml",
            instance.as_str(),
        ),
        ("kubernetes/clusters/staging/apps.yaml", apps),
        ("kubernetes/apps/hello.yaml", app),
    ] {
        let at = dir.join(path);
        std::fs::create_dir_all(at.parent().expect("parent")).expect("mkdir");
        std::fs::write(at, text).expect("write fleet file");
    }
}

/// The cluster with real Flux and both Git hosts serving `fleet`, the example root in a
/// workspace wired to it, and the Git servers' commit on `main`.
struct Rebuild {
    cluster: TestCluster,
    /// The deploy key's public half, as the Git server accepts it.
    public_key: String,
    /// Its private half, as the root's ephemeral variable gives it.
    identity: String,
    client: kube::Client,
    ws: Workspace,
    /// The commit on `main` of the source the root syncs (each host's repository has its own).
    head: String,
    _dir: tempfile::TempDir,
}

async fn start(env: &[(&str, &str)]) -> Option<Rebuild> {
    start_with_files(env, &[]).await
}

/// [`start`], with more files in the workspace (`name`, contents).
async fn start_with_files(env: &[(&str, &str)], files: &[(&str, &str)]) -> Option<Rebuild> {
    let ws = root_workspace("talos-cilium-flux", planned_skip("talos-cilium-flux"))?;
    let dir = tempfile::tempdir().expect("tempdir");
    let fleet = dir.path().join("fleet");
    write_fleet(&fleet);
    let (identity, public) = deploy_key(dir.path());
    let cluster = TestCluster::start_with(TalosConfig {
        git: GitConfig {
            repositories: vec![(GITHUB.into(), fleet.clone()), (BACKUP.into(), fleet)],
            authorized_keys: Vec::new(),
            known_hosts_out: None,
            read_only_hosts: vec!["backup.example.internal".into()],
        },
        ..TalosConfig::default()
    })
    .await;
    let Some(git) = cluster.git() else {
        eprintln!("skipped: the loopback Git servers and real Flux need the embedded cluster");
        return None;
    };
    git.authorize(&public).expect("authorize the deploy key");
    let source = env
        .iter()
        .find(|(key, _)| *key == "TF_VAR_flux_source_url")
        .map_or(GITHUB, |(_, url)| url);
    let head = git.head(source).await.expect("the commit on main");
    ws.write(
        "stand_ins.auto.tfvars.json",
        &json!({ "ephemeral_talos_cluster_kubeconfig": { "kubeconfig_raw": read(&cluster.kubeconfig_path) } })
            .to_string(),
    );
    let mut ws = ws
        .env("TF_VAR_github_deploy_key", &identity)
        .env("TF_VAR_flux_known_hosts", &git.known_hosts());
    for (key, value) in env {
        ws = ws.env(key, value);
    }
    for (name, text) in files {
        ws.write(name, text);
    }
    ws.init();
    let client = cluster.client().await;
    Some(Rebuild {
        cluster,
        public_key: public,
        identity,
        client,
        ws,
        head,
        _dir: dir,
    })
}

fn ready(object: &Json) -> Option<(String, String)> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")
        .map(|c| {
            (
                c["status"].as_str().unwrap_or_default().to_owned(),
                c["message"].as_str().unwrap_or_default().to_owned(),
            )
        })
}

/// Asks Flux to reconcile `object` now (what `flux reconcile` does: the annotation the
/// controllers watch), instead of waiting for its interval.
async fn request_reconcile(objects: &Api<DynamicObject>, name: &str, token: &str) {
    objects
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": token}}}),
            ),
        )
        .await
        .expect("request a reconcile");
}

/// Waits until `objects/name` is Ready with `status` and returns its Ready message.
async fn wait_ready(objects: &Api<DynamicObject>, name: &str, status: &str) -> String {
    wait_for(
        &format!("{name} Ready={status}"),
        Duration::from_secs(120),
        || async {
            let object = get(objects, name).await?;
            ready(&object)
                .filter(|(s, _)| s == status)
                .map(|(_, message)| message)
        },
    )
    .await
}

/// The sync source `GitRepository/flux-system/flux-system`, asserted to fetch `url` with the
/// deploy key's Secret and to hold the artifact of commit `head`; its API and that revision.
async fn synced_source(
    client: &kube::Client,
    url: &str,
    head: &str,
) -> (Api<DynamicObject>, String) {
    let sources = api(
        client,
        GIT_REPOSITORY,
        "gitrepositories",
        Some("flux-system"),
    );
    let source = get(&sources, "flux-system")
        .await
        .expect("GitRepository flux-system");
    assert_eq!(source["spec"]["url"], url, "{source}");
    assert_eq!(source["spec"]["secretRef"]["name"], "flux-github");
    let revision = source["status"]["artifact"]["revision"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(revision, format!("refs/heads/main@sha1:{head}"), "{source}");
    (sources, revision)
}

/// A plan that changes nothing (`-detailed-exitcode` 0).
fn assert_plan_empty(ws: &Workspace, after: &str) {
    let plan = ws.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]);
    assert_eq!(
        plan.code,
        Some(0),
        "the plan after {after} is not empty:\n{}",
        plan.text()
    );
}

const APPLY: &[&str] = &["apply", "-auto-approve", "-no-color", "-input=false"];

on_both_clis!(async the_staging_root_bootstraps_real_flux_from_github_over_ssh);
/// The seeds' staging bootstrap: one apply takes the cluster from no CNI to Flux syncing
/// `kubernetes/clusters/staging` from GitHub with the deploy key the provider wrote; Flux then
/// owns the FluxInstance (its own copy from Git), and the repeat plan is empty. A deleted deploy
/// key fails the clone as users see it, the plan names it, and apply makes Flux whole again.
async fn the_staging_root_bootstraps_real_flux_from_github_over_ssh() {
    // The Gitea rollback key, kept while Gitea is a rollback target: in a file the test removes
    // to retire it, as a user removes it from the input.
    let gitea_key = "-----BEGIN OPENSSH PRIVATE KEY-----\nthe-gitea-rollback-key\n-----END OPENSSH PRIVATE KEY-----\n";
    let gitea_file = json!({ "gitea_rollback_key": gitea_key }).to_string();
    let Some(run) = start_with_files(&[], &[("gitea.auto.tfvars.json", &gitea_file)]).await else {
        return;
    };
    let Rebuild {
        cluster,
        public_key,
        identity,
        client,
        ws,
        head,
        ..
    } = &run;
    let git = cluster.git().expect("Git servers");
    let started = std::time::Instant::now();
    ws.ok(APPLY);
    let applied = started.elapsed();

    let (sources, revision) = synced_source(client, GITHUB, head).await;
    // kustomize-controller applied the sync path: the app, and the FluxInstance from Git.
    let kustomizations = api(client, KUSTOMIZATION, "kustomizations", Some("flux-system"));
    wait_ready(&kustomizations, "apps", "True").await;
    let hello = get(&configmaps(client, "default"), "hello")
        .await
        .expect("the app from Git");
    assert_eq!(hello["data"]["greeting"], "from-git");
    let instance = get(&instances(client), "flux").await.expect("FluxInstance");
    assert_eq!(
        instance["metadata"]["labels"]["kustomize.toolkit.fluxcd.io/name"], "flux-system",
        "Flux adopted the FluxInstance: {instance}"
    );
    let secrets = api(
        client,
        crate::flux_bootstrap::SECRET,
        "secrets",
        Some("flux-system"),
    );
    assert!(
        get(&secrets, "flux-system").await.is_some(),
        "the Gitea rollback key is kept while it is an input"
    );
    assert_plan_empty(ws, "the bootstrap, with Flux owning the FluxInstance");
    // The deploy keys reached the cluster, and nothing a user can read from the run holds them.
    let found =
        super::secrets::places_holding(ws, &[identity.clone(), gitea_key.to_owned()], None, &[]);
    assert!(found.is_empty(), "{}", found.join("\n"));
    eprintln!(
        "staging: one {} apply from no CNI to Flux synced at {revision}: {:.1} s",
        ws.cli().name(),
        applied.as_secs_f64()
    );

    // The deploy key deleted in the cluster: source-controller cannot fetch any more.
    secrets
        .delete("flux-github", &DeleteParams::default())
        .await
        .expect("delete the deploy key");
    request_reconcile(&sources, "flux-system", "deleted-key").await;
    let failure = wait_ready(&sources, "flux-system", "False").await;
    assert!(
        failure.contains("flux-github") && failure.contains("not found"),
        "source-controller names the missing Secret: {failure}"
    );
    let plan = ws.run(&["plan", "-no-color", "-input=false", "-detailed-exitcode"]);
    assert_eq!(plan.code, Some(2), "{}", plan.text());
    assert!(
        plan.flat().contains("flux-github"),
        "the plan names the deleted Secret:\n{}",
        plan.text()
    );
    ws.ok(APPLY);
    request_reconcile(&sources, "flux-system", "restored-key").await;
    wait_ready(&sources, "flux-system", "True").await;
    assert_plan_empty(ws, "the repair");

    // A key the Git host no longer accepts: the clone is refused as users see it.
    git.revoke(public_key).expect("revoke");
    request_reconcile(&sources, "flux-system", "revoked-key").await;
    let failure = wait_ready(&sources, "flux-system", "False").await;
    assert!(
        failure.contains("unable to authenticate"),
        "source-controller says the key was refused: {failure}"
    );
    git.authorize(public_key).expect("authorize again");
    request_reconcile(&sources, "flux-system", "authorized-again").await;
    wait_ready(&sources, "flux-system", "True").await;

    // The Gitea key retired by removing it from the input: its Secret goes, Flux keeps syncing
    // from GitHub.
    std::fs::remove_file(ws.path().join("gitea.auto.tfvars.json")).expect("retire the key");
    ws.ok(APPLY);
    assert!(
        get(&secrets, "flux-system").await.is_none(),
        "the retired Gitea key's Secret is deleted"
    );
    request_reconcile(&sources, "flux-system", "gitea-retired").await;
    wait_ready(&sources, "flux-system", "True").await;
    assert!(get(&secrets, "flux-github").await.is_some());
    assert_plan_empty(ws, "retiring the Gitea key");

    // The FluxInstance file changed in the root only: Flux owns the FluxInstance, so the plan
    // says apply leaves it alone, and apply does not fight Flux.
    let file = ws.path().join("flux/flux-instance.yaml");
    let text = std::fs::read_to_string(&file).expect("flux-instance.yaml");
    let edited = text.replace("networkPolicy: true", "networkPolicy: false");
    assert_ne!(
        edited, text,
        "the example's FluxInstance sets networkPolicy"
    );
    std::fs::write(&file, edited).expect("edit flux-instance.yaml");
    let plan = ws.ok(&["plan", "-no-color", "-input=false"]);
    assert!(
        plan.flat()
            .contains("Flux Kustomization \"flux-system/flux-system\" has adopted FluxInstance flux-system/flux"),
        "the plan says Flux owns the FluxInstance:\n{}",
        plan.text()
    );
    ws.ok(APPLY);
    let instance = get(&instances(client), "flux").await.expect("FluxInstance");
    assert_eq!(
        instance["spec"]["cluster"]["networkPolicy"],
        json!(true),
        "apply leaves Flux's FluxInstance as Git has it: {instance}"
    );
    assert_plan_empty(ws, "an apply of an instance_yaml Flux owns");
}

on_both_clis!(async a_phase_3_rebuild_syncs_from_the_backup_with_applications_suspended);
/// The seeds' phase-3 rebuild during a GitHub outage: the Git source points at the read-only
/// backup and the applications start suspended, both as bootstrap inputs. Flux syncs the cluster
/// path from the backup, the `apps` Kustomization stays suspended (its app never applied), and
/// the repeat plan is empty.
async fn a_phase_3_rebuild_syncs_from_the_backup_with_applications_suspended() {
    let Some(run) = start(&[
        ("TF_VAR_flux_source_url", BACKUP),
        ("TF_VAR_suspend_applications", "true"),
    ])
    .await
    else {
        return;
    };
    let Rebuild {
        client, ws, head, ..
    } = &run;
    ws.ok(APPLY);

    synced_source(client, BACKUP, head).await;
    let kustomizations = api(client, KUSTOMIZATION, "kustomizations", Some("flux-system"));
    let apps = wait_for(
        "the apps Kustomization",
        Duration::from_secs(60),
        || async { get(&kustomizations, "apps").await },
    )
    .await;
    assert_eq!(
        apps["spec"]["suspend"],
        json!(true),
        "the rebuild starts with the applications suspended: {apps}"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        get(&configmaps(client, "default"), "hello").await.is_none(),
        "a suspended Kustomization applies nothing"
    );
    assert_plan_empty(ws, "the rebuild");
}
