//! Day 2: Cilium version upgrades as a user runs them, a `version` bumped in a root and applied,
//! on three nodes (the real DaemonSet controller rolls the agents one node at a time):
//! - one minor up: the pre-flight DaemonSet is seen ready on every node, then gone, before the
//!   agents change; `upgradeCompatibility` keeps the first minor; the next plan is empty;
//! - two minors up: refused at plan naming the minor in between; `upgrade_path_check = false`
//!   lets it through with a warning; after an upgrade killed half-way, judged from the version
//!   deployed before it too;
//! - an image one node cannot pull, then one that crashes there: the pre-flight fails naming the
//!   node, the image and the reason (the crash loop without waiting for `timeout`), before the
//!   agent DaemonSet changes;
//! - a node stuck mid-rollout (pre-flight off): named, and `rollback_on_failure` rolls back;
//! - a failed create, then an apply: the agent DaemonSet is never removed;
//! - an adoption that would flip `kubeProxyReplacement` of the running Cilium: refused.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::Api;
use serde_json::Value;

use crate::harness::{TestCluster, records};

use super::*;

/// Three nodes: one control plane, two workers.
async fn three_nodes() -> TestCluster {
    TestCluster::start_with(talos_sim::talos::TalosConfig {
        workers: 2,
        ..Default::default()
    })
    .await
}

fn cilium_at(version: &str, extra: &str) -> String {
    format!(
        "resource \"talosboot_cilium\" \"this\" {{\n  version = \"{version}\"\n  timeout = \"3m\"\n{extra}\n}}\n"
    )
}

/// The newest record of release `name`: (revision, chart version, user values).
async fn newest_record(client: &kube::Client, name: &str) -> Option<(i64, String, Value)> {
    let (revision, record) = records(client, NS, name).await.pop_last()?;
    let chart = record["chart"]["metadata"]["version"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    Some((revision, chart, record["config"].clone()))
}

/// The images of the agent DaemonSet's containers, and its generation.
async fn agent_daemonset(client: &kube::Client) -> (Vec<String>, i64, String) {
    let ds = Api::<DaemonSet>::namespaced(client.clone(), NS)
        .get("cilium")
        .await
        .expect("the agent DaemonSet");
    let images = ds
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .map(|p| {
            p.containers
                .iter()
                .filter_map(|c| c.image.clone())
                .collect()
        })
        .unwrap_or_default();
    (
        images,
        ds.metadata.generation.unwrap_or_default(),
        ds.metadata.uid.unwrap_or_default(),
    )
}

/// Watches, in the background, DaemonSet `cilium-pre-flight-check` (the most pods it had ready)
/// and whether the agent DaemonSet was ever missing, until dropped.
struct Watch {
    preflight_ready: Arc<AtomicI64>,
    agent_missing: Arc<AtomicBool>,
    stop: tokio_util::sync::DropGuard,
}

impl Watch {
    fn start(client: &kube::Client) -> Watch {
        let (preflight_ready, agent_missing) = (
            Arc::new(AtomicI64::new(-1)),
            Arc::new(AtomicBool::new(false)),
        );
        let cancel = tokio_util::sync::CancellationToken::new();
        let (ready, missing, token) = (
            preflight_ready.clone(),
            agent_missing.clone(),
            cancel.clone(),
        );
        let ds: Api<DaemonSet> = Api::namespaced(client.clone(), NS);
        tokio::spawn(async move {
            while !token.is_cancelled() {
                if let Ok(Some(p)) = ds.get_opt("cilium-pre-flight-check").await {
                    let n = p.status.map_or(0, |s| i64::from(s.number_ready));
                    ready.fetch_max(n, Ordering::Relaxed);
                }
                if let Ok(None) = ds.get_opt("cilium").await {
                    missing.store(true, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(150)).await;
            }
        });
        Watch {
            preflight_ready,
            agent_missing,
            stop: cancel.drop_guard(),
        }
    }
}

on_both_clis!(async one_minor_up_runs_the_preflight_on_every_node_and_keeps_upgrade_compatibility);
async fn one_minor_up_runs_the_preflight_on_every_node_and_keeps_upgrade_compatibility() {
    let cluster = three_nodes().await;
    if !cluster.nodes_are_emulated() {
        return; // installs and upgrades Cilium
    }
    let client = cluster.client().await;
    let ws = workspace(&cluster, &cilium_at("1.19.7", ""));
    ws.apply();
    let state = ws.state_text();
    assert!(
        state.contains("\"upgrade_compatibility\": \"1.19\""),
        "the first minor recorded: {state}"
    );
    let (_, _, values) = newest_record(&client, "cilium").await.expect("a record");
    assert_eq!(values["upgradeCompatibility"], "1.19");

    ws.write("main.tf", &root(&cluster, &cilium_at("1.20.2", "")));
    let plan = ws.ok(&["plan", "-no-color"]);
    assert!(
        plan.flat().contains("1.19.7\" -> \"1.20.2\""),
        "{}",
        plan.text()
    );
    let watch = Watch::start(&client);
    let applied = ws.apply();
    let seen = watch.preflight_ready.load(Ordering::Relaxed);
    assert_eq!(
        seen,
        3,
        "the pre-flight DaemonSet was ready on every node during the apply: {}",
        applied.text()
    );
    assert!(!watch.agent_missing.load(Ordering::Relaxed));
    drop(watch.stop);
    let preflight = Api::<DaemonSet>::namespaced(client.clone(), NS)
        .get_opt("cilium-pre-flight-check")
        .await
        .expect("read");
    assert!(preflight.is_none(), "the pre-flight check is removed");
    assert!(
        newest_record(&client, "cilium-preflight").await.is_none(),
        "its release is uninstalled"
    );
    let (revision, chart, values) = newest_record(&client, "cilium").await.expect("a record");
    assert_eq!((revision, chart.as_str()), (2, "1.20.2"));
    assert_eq!(
        values["upgradeCompatibility"], "1.19",
        "the upgrade keeps the first minor's defaults"
    );
    let (images, _, _) = agent_daemonset(&client).await;
    assert!(images.iter().all(|i| i.contains("v1.20.2")), "{images:?}");
    assert!(nodes_ready(&client).await);
    assert!(!ws.plan_has_changes(), "the next plan is empty");
}

on_both_clis!(async two_minors_up_fail_at_plan_naming_the_minor_between);
async fn two_minors_up_fail_at_plan_naming_the_minor_between() {
    let cluster = TestCluster::start().await;
    if !cluster.nodes_are_emulated() {
        return; // installs Cilium
    }
    let client = cluster.client().await;
    let ws = workspace(&cluster, &cilium_at("1.18.4", ""));
    ws.apply();
    ws.write("main.tf", &root(&cluster, &cilium_at("1.20.2", "")));
    let plan = ws.run(&["plan", "-no-color"]);
    assert!(!plan.success, "refused at plan: {}", plan.text());
    let text = plan.flat();
    assert!(
        text.contains("Cilium 1.18.4 cannot be upgraded to 1.20.2 in one step"),
        "{text}"
    );
    // The chart repository is not reachable from the machine running the CLI here: the step is
    // named by its minor, and the plan does not fail for that reason.
    assert!(text.contains("Apply 1.19.x, then 1.20.2"), "{text}");
    assert!(
        text.contains("version = \"1.20.2\""),
        "on the attribute: {text}"
    );
    let (revision, chart, _) = newest_record(&client, "cilium").await.expect("a record");
    assert_eq!((revision, chart.as_str()), (1, "1.18.4"), "nothing changed");

    // The user who knows better.
    ws.write(
        "main.tf",
        &root(
            &cluster,
            &cilium_at("1.20.2", "  upgrade_path_check = false"),
        ),
    );
    let plan = ws.ok(&["plan", "-no-color"]);
    assert!(
        plan.flat()
            .contains("cannot be upgraded to 1.20.2 in one step")
            && plan.flat().contains("Warning"),
        "a warning, not an error: {}",
        plan.text()
    );

    // An upgrade to 1.19.7 killed half-way (its record written, `pending-upgrade`; the agents
    // still run 1.18.4): 1.20.2 next would skip 1.19 on the nodes, refused as before; finishing
    // the upgrade is not.
    record_pending_upgrade(&client, "1.19.7").await;
    ws.write("main.tf", &root(&cluster, &cilium_at("1.20.2", "")));
    let plan = ws.run(&["plan", "-no-color"]);
    let text = plan.flat();
    assert!(
        !plan.success
            && text.contains("Cilium 1.18.4 cannot be upgraded to 1.20.2 in one step")
            && text.contains("the newest release record, 1.19.7, did not finish (pending-upgrade)"),
        "{}",
        plan.text()
    );
    ws.write("main.tf", &root(&cluster, &cilium_at("1.19.7", "")));
    let plan = ws.ok(&["plan", "-no-color"]);
    assert!(!plan.flat().contains("in one step"), "{}", plan.text());
}

/// Writes the record of an upgrade of release `cilium` to `chart_version` that never finished,
/// as a runner killed mid-upgrade leaves it: the next revision, `pending-upgrade`, while the
/// one that ran stays `deployed`.
async fn record_pending_upgrade(client: &kube::Client, chart_version: &str) {
    use base64::Engine;
    use std::io::{Read, Write};
    let (revision, _, _) = newest_record(client, "cilium").await.expect("a record");
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), NS);
    let mut secret = secrets
        .get(&format!("sh.helm.release.v1.cilium.v{revision}"))
        .await
        .expect("record");
    let b64 = base64::engine::general_purpose::STANDARD;
    let field = &secret.data.as_ref().expect("data")["release"].0;
    let gz = b64.decode(field.trim_ascii()).expect("base64");
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(gz.as_slice())
        .read_to_end(&mut raw)
        .expect("gunzip");
    let mut record: Value = serde_json::from_slice(&raw).expect("json");
    let next = revision + 1;
    record["version"] = next.into();
    record["info"]["status"] = "pending-upgrade".into();
    record["chart"]["metadata"]["version"] = chart_version.into();
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(record.to_string().as_bytes()).expect("gzip");
    let encoded = b64.encode(enc.finish().expect("gzip"));
    let name = format!("sh.helm.release.v1.cilium.v{next}");
    secret.metadata = kube::api::ObjectMeta {
        name: Some(name),
        labels: secret.metadata.labels.map(|mut l| {
            l.insert("version".into(), next.to_string());
            l.insert("status".into(), "pending-upgrade".into());
            l
        }),
        ..Default::default()
    };
    secret.data = Some(
        [(
            "release".to_owned(),
            k8s_openapi::ByteString(encoded.into_bytes()),
        )]
        .into(),
    );
    secrets
        .create(&kube::api::PostParams::default(), &secret)
        .await
        .expect("write the pending record");
}

on_both_clis!(async an_image_one_node_cannot_pull_fails_at_preflight_before_the_daemonset_changes);
async fn an_image_one_node_cannot_pull_fails_at_preflight_before_the_daemonset_changes() {
    let cluster = three_nodes().await;
    let Some(talos) = cluster.talos() else {
        return; // makes an image unpullable on one node
    };
    let client = cluster.client().await;
    let ws = workspace(&cluster, &cilium_at("1.19.7", ""));
    ws.apply();
    let (before, generation, _) = agent_daemonset(&client).await;
    let node = talos
        .nodes()
        .last()
        .map(|n| n.name.clone())
        .expect("a worker");
    talos.set_image_pull_failure("*cilium/cilium:v1.20.2*", Some(vec![node.clone()]));

    ws.write("main.tf", &root(&cluster, &cilium_at("1.20.2", "")));
    let out = ws.run(&["apply", "-auto-approve", "-no-color"]);
    assert!(!out.success, "{}", out.text());
    let text = out.flat();
    for needle in [
        "pre-flight check of Cilium 1.20.2",
        node.as_str(),
        "ErrImagePull",
        "cilium/cilium:v1.20.2",
        "Nothing was upgraded: Cilium 1.19.7",
    ] {
        assert!(text.contains(needle), "{needle:?} in: {text}");
    }
    let (after, generation_after, _) = agent_daemonset(&client).await;
    assert_eq!(
        (after, generation_after),
        (before, generation),
        "the agent DaemonSet never changed"
    );
    let (revision, chart, _) = newest_record(&client, "cilium").await.expect("a record");
    assert_eq!((revision, chart.as_str()), (1, "1.19.7"));
    assert!(
        newest_record(&client, "cilium-preflight").await.is_none(),
        "the check is removed after a failure too"
    );

    // The node pulls it, but the new agent crashes there: the check fails once the pod backs
    // off, with no known signature to wait for, not at `timeout`.
    talos.clear_image_pull_failure("*cilium/cilium:v1.20.2*", None);
    talos.set_crash_loop("*cilium/cilium:v1.20.2*", Some(vec![node.clone()]));
    let started = std::time::Instant::now();
    let out = ws.run(&["apply", "-auto-approve", "-no-color"]);
    assert!(!out.success, "{}", out.text());
    let text = out.flat();
    for needle in [
        "pre-flight check of Cilium 1.20.2",
        "Kubernetes is backing off its restarts (CrashLoopBackOff)",
        "Nothing was upgraded: Cilium 1.19.7",
    ] {
        assert!(text.contains(needle), "{needle:?} in: {text}");
    }
    assert!(
        !text.contains("Not ready within the timeout"),
        "ended by the crash loop after {:?}: {text}",
        started.elapsed()
    );
    assert_eq!(
        agent_daemonset(&client).await.1,
        generation,
        "agents unchanged"
    );

    // Once the image runs there, the same apply goes through.
    talos.clear_crash_loop("*cilium/cilium:v1.20.2*", None);
    ws.apply();
    assert!(!ws.plan_has_changes());
}

on_both_clis!(async a_node_stuck_mid_rollout_is_named_and_rolled_back);
async fn a_node_stuck_mid_rollout_is_named_and_rolled_back() {
    let cluster = three_nodes().await;
    let Some(talos) = cluster.talos() else {
        return; // makes an image unpullable on one node
    };
    let client = cluster.client().await;
    let options = "  preflight = false\n  rollback_on_failure = true";
    let ws = workspace(&cluster, &cilium_at("1.19.7", options));
    ws.apply();
    let node = talos
        .nodes()
        .last()
        .map(|n| n.name.clone())
        .expect("a worker");
    talos.set_image_pull_failure("*cilium/cilium:v1.20.2*", Some(vec![node.clone()]));

    ws.write("main.tf", &root(&cluster, &cilium_at("1.20.2", options)));
    let out = ws.run(&["apply", "-auto-approve", "-no-color"]);
    assert!(!out.success, "{}", out.text());
    let text = out.flat();
    assert!(text.contains(&node), "the stuck node is named: {text}");
    assert!(text.contains("ErrImagePull"), "{text}");
    assert!(
        text.contains("rolled back to revision 1 (chart 1.19.7)") && text.contains("ready again"),
        "{text}"
    );
    let (revision, chart, _) = newest_record(&client, "cilium").await.expect("a record");
    assert_eq!(
        (revision, chart.as_str()),
        (3, "1.19.7"),
        "revision 3 is the rollback"
    );
    let (images, _, _) = agent_daemonset(&client).await;
    assert!(images.iter().all(|i| i.contains("v1.19.7")), "{images:?}");
    assert!(nodes_ready(&client).await, "every node has its CNI again");
    let state = ws.state_text();
    assert!(
        state.contains("\"chart_version\": \"1.19.7\"")
            && state.contains("\"status\": \"deployed\"")
            && state.contains("\"revision\": 3,"),
        "the state says what runs, the rollback's revision: {state}"
    );
    // The upgrade is still wanted: the next plan proposes it again.
    assert!(ws.plan_has_changes());
}

on_both_clis!(async a_failed_create_followed_by_an_apply_never_removes_the_daemonset);
async fn a_failed_create_followed_by_an_apply_never_removes_the_daemonset() {
    let cluster = three_nodes().await;
    let Some(talos) = cluster.talos() else {
        return; // makes an image unpullable on one node
    };
    let client = cluster.client().await;
    let node = talos
        .nodes()
        .last()
        .map(|n| n.name.clone())
        .expect("a worker");
    talos.set_image_pull_failure(
        &format!("*cilium/cilium:v{CURRENT}*"),
        Some(vec![node.clone()]),
    );
    let ws = workspace(&cluster, &cilium_at(CURRENT, ""));
    let out = ws.run(&["apply", "-auto-approve", "-no-color"]);
    assert!(!out.success, "{}", out.text());
    assert!(out.flat().contains("stays installed"), "{}", out.text());
    assert!(ws.state_text().contains("\"status\": \"tainted\""));
    let (_, _, uid) = agent_daemonset(&client).await;

    talos.clear_image_pull_failure(&format!("*cilium/cilium:v{CURRENT}*"), None);
    let watch = Watch::start(&client);
    let applied = ws.apply();
    assert!(
        !watch.agent_missing.load(Ordering::Relaxed),
        "the agent DaemonSet was never removed: {}",
        applied.text()
    );
    let (_, _, uid_after) = agent_daemonset(&client).await;
    assert_eq!(uid_after, uid, "the same DaemonSet, never recreated");
    assert!(
        applied.flat().contains("left running"),
        "the replacement's destroy only forgot it: {}",
        applied.text()
    );
    assert!(!ws.state_text().contains("tainted"));
    assert!(nodes_ready(&client).await);
    assert!(!ws.plan_has_changes());
}

on_both_clis!(async an_adoption_that_would_flip_the_kube_proxy_replacement_is_refused);
async fn an_adoption_that_would_flip_the_kube_proxy_replacement_is_refused() {
    // Inline Cilium replaces kube-proxy; the root asks for the variant with kube-proxy.
    let cluster = TestCluster::start_with(talos_sim::talos::TalosConfig {
        inline_cilium: Some("1.20.2".into()),
        kube_proxy: true,
        talos_version: talos_sim::talos::TalosVersion::V1_12,
        ..Default::default()
    })
    .await;
    if !cluster.nodes_are_emulated() {
        return; // needs a cluster whose Cilium came from inline manifests
    }
    let client = cluster.client().await;
    let before = adoption::uids(&client).await;
    let flip = "  adopt_existing = true\n  kube_proxy_replacement = false";
    let ws = workspace(&cluster, &cilium(flip));
    for args in [
        &["plan", "-no-color"][..],
        &["apply", "-auto-approve", "-no-color"][..],
    ] {
        let out = ws.run(args);
        assert!(!out.success, "{}", out.text());
        let text = out.flat();
        assert!(
            text.contains("would change settings of the running Cilium")
                && text.contains("kubeProxyReplacement (cilium-config `kube-proxy-replacement`): \"true\" -> \"false\"")
                && text.contains("accept_running_config_changes = [\"kubeProxyReplacement\""),
            "{text}"
        );
    }
    assert_eq!(adoption::uids(&client).await, before, "nothing was touched");
    assert!(
        newest_record(&client, "cilium").await.is_none(),
        "no release"
    );

    // Taken on purpose: the plan goes through, listing the change.
    let accepted = format!(
        "{flip}\n  accept_running_config_changes = [\"kubeProxyReplacement\", \"k8sServiceHost\", \"k8sServicePort\"]"
    );
    ws.write("main.tf", &root(&cluster, &cilium(&accepted)));
    let plan = ws.ok(&["plan", "-no-color"]);
    assert!(
        plan.flat()
            .contains("changes settings of the running Cilium"),
        "{}",
        plan.text()
    );
}
