//! Day-2 Cilium on three nodes, as Cilium's upgrade guide runs it, with the real Helm on the
//! machine against the real control plane: a chart upgrade rolls the agents node by node (the
//! real DaemonSet controller, `maxUnavailable` honoured), the pre-flight release installs beside
//! `cilium` and is Ready on every node, an image the registry cannot give one node fails there
//! with the kubelet's `ErrImagePull` and events and recovers once the fault is cleared, and an
//! agent restart drops that node's pod network until the new agent is Ready.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{Api, DeleteParams, ListParams};
use talos_sim::talos::cluster::INLINE_CILIUM_VALUES;
use talos_sim::talos::{TalosCluster, TalosConfig};

use super::common;

const OLD: &str = "1.19.7";
const NEW: &str = "1.20.2";
const NEW_IMAGE: &str = "quay.io/cilium/cilium:v1.20.2";

/// One control plane and two workers.
async fn three_nodes() -> (TalosCluster, kube::Client) {
    common::start_with(TalosConfig {
        workers: 2,
        ..TalosConfig::default()
    })
    .await
}

/// The machine's Helm 3 with its own homes and the cluster's kubeconfig.
struct HostHelm {
    helm: PathBuf,
    dir: tempfile::TempDir,
}

impl HostHelm {
    fn new(cluster: &TalosCluster) -> HostHelm {
        let dir = tempfile::tempdir().expect("tempdir");
        cluster
            .write_kubeconfig(&dir.path().join("kubeconfig"))
            .expect("kubeconfig");
        std::fs::write(dir.path().join("talos.json"), INLINE_CILIUM_VALUES).expect("values");
        HostHelm {
            helm: cluster.shared.tools.helm.clone(),
            dir,
        }
    }

    /// Runs Helm; panics with its output unless it succeeds.
    async fn run(&self, args: Vec<String>) -> String {
        let mut command = tokio::process::Command::new(&self.helm);
        let home = self.dir.path();
        command
            .args(&args)
            .arg("--kubeconfig")
            .arg(home.join("kubeconfig"))
            .env("HELM_CACHE_HOME", home.join("cache"))
            .env("HELM_CONFIG_HOME", home.join("config"))
            .env("HELM_DATA_HOME", home.join("data"));
        let out = command.output().await.expect("helm runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "helm {args:?}: {text}");
        text
    }

    fn talos_values(&self) -> String {
        self.dir.path().join("talos.json").display().to_string()
    }
}

fn words(line: &str) -> Vec<String> {
    line.split_whitespace().map(String::from).collect()
}

fn package(cluster: &TalosCluster, version: &str) -> String {
    cluster
        .chart_package("cilium", version)
        .unwrap_or_else(|| panic!("cilium {version} is published"))
        .display()
        .to_string()
}

/// `helm install cilium` at `version` with the Talos values and `extra` flags.
async fn install_cilium(cluster: &TalosCluster, helm: &HostHelm, version: &str, extra: &str) {
    let mut args = words("install cilium");
    args.push(package(cluster, version));
    args.extend(words("--namespace kube-system --values"));
    args.push(helm.talos_values());
    args.extend(words(extra));
    helm.run(args).await;
}

fn ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn node_of(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default()
}

fn image_of(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}

/// Waits until the DaemonSet `name` is Ready on every one of the `nodes` at its latest
/// generation.
async fn rolled_out(client: &kube::Client, name: &str, nodes: i32) {
    let daemon_sets: Api<DaemonSet> = Api::namespaced(client.clone(), "kube-system");
    common::eventually(
        120,
        &format!("DaemonSet {name} Ready on {nodes} nodes"),
        || async {
            let ds = daemon_sets.get_opt(name).await.ok()??;
            let generation = ds.metadata.generation;
            let s = ds.status?;
            (s.observed_generation == generation
                && s.desired_number_scheduled == nodes
                && s.updated_number_scheduled == Some(nodes)
                && s.number_ready == nodes
                && s.number_available == Some(nodes))
            .then_some(())
        },
    )
    .await;
}

async fn pods(client: &kube::Client, selector: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), "kube-system")
        .list(&ListParams::default().labels(selector))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

/// A chart upgrade with `maxUnavailable: 1` on three nodes: the real DaemonSet controller
/// replaces one agent at a time (never two nodes without a Ready agent, sampled every 50 ms),
/// each node's pod network drops and comes back, and `upgradeCompatibility: "1.19"` keeps
/// 1.19's `envoy-xds-mode` on the 1.20 chart. The rollout takes seconds.
#[tokio::test(flavor = "multi_thread")]
async fn a_chart_upgrade_rolls_the_agents_one_node_at_a_time() {
    let (cluster, client) = three_nodes().await;
    let helm = HostHelm::new(&cluster);
    let strategy = "--set updateStrategy.rollingUpdate.maxUnavailable=1";
    install_cilium(&cluster, &helm, OLD, strategy).await;
    rolled_out(&client, "cilium", 3).await;

    // Sample the agents while the upgrade rolls.
    let sampler = {
        let client = client.clone();
        let shared = cluster.shared.clone();
        let names: Vec<String> = cluster.nodes().iter().map(|n| n.name.clone()).collect();
        tokio::spawn(async move {
            let mut max_unready = 0;
            let mut cni_dropped = BTreeSet::new();
            let start = Instant::now();
            loop {
                let agents = pods(&client, "k8s-app=cilium").await;
                let ready_nodes: BTreeSet<String> = agents
                    .iter()
                    .filter(|p| ready(p) && p.metadata.deletion_timestamp.is_none())
                    .map(node_of)
                    .collect();
                max_unready = max_unready.max(names.len() - ready_nodes.len());
                for node in &names {
                    if !shared.cni_ready(node) {
                        cni_dropped.insert(node.clone());
                    }
                }
                let done = agents.len() == names.len()
                    && agents.iter().all(|p| ready(p) && image_of(p) == NEW_IMAGE);
                if done || start.elapsed() > Duration::from_secs(120) {
                    return (max_unready, cni_dropped, start.elapsed(), done);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let mut args = words("upgrade cilium");
    args.push(package(&cluster, NEW));
    args.extend(words("--namespace kube-system --values"));
    args.push(helm.talos_values());
    args.extend(words(strategy));
    args.extend(words("--set upgradeCompatibility=1.19"));
    helm.run(args).await;
    let (max_unready, cni_dropped, took, done) = sampler.await.expect("sampler");
    assert!(done, "every agent runs {NEW_IMAGE} within 120 s");
    assert_eq!(
        max_unready, 1,
        "one node at a time: at most one node without a Ready agent, and one seen"
    );
    assert_eq!(
        cni_dropped.len(),
        3,
        "every node's pod network dropped while its agent restarted: {cni_dropped:?}"
    );
    rolled_out(&client, "cilium", 3).await;
    assert!(
        cluster.nodes().iter().all(|n| cluster.cni_ready(&n.name)),
        "every node's pod network is back"
    );
    eprintln!("three agents rolled in {took:?}");
    assert!(took < Duration::from_secs(60), "took {took:?}");
    let config = Api::<ConfigMap>::namespaced(client.clone(), "kube-system")
        .get("cilium-config")
        .await
        .expect("cilium-config");
    assert_eq!(
        config
            .data
            .unwrap_or_default()
            .get("envoy-xds-mode")
            .map(String::as_str),
        Some("split"),
        "upgradeCompatibility 1.19 keeps 1.19's xDS mode (1.20 installs default to ads)"
    );
}

/// `reason: message` of every event about `pod`, with its count.
async fn pod_events(client: &kube::Client, pod: &str) -> Vec<String> {
    common::events(client, "kube-system", pod).await
}

/// The pre-flight of Cilium's upgrade guide for 1.20.2 beside a running 1.19.7 release, with the
/// new image unpullable on one worker: the other nodes' pre-flight pods are Ready, the worker's
/// waits in `ErrImagePull`/`ImagePullBackOff` with the kubelet's events, the agents are not
/// touched; once the fault is cleared the kubelet's retry pulls it and the pre-flight is Ready
/// on every node; `helm uninstall cilium-preflight` removes it and leaves `cilium` as it was.
#[tokio::test(flavor = "multi_thread")]
async fn the_pre_flight_runs_beside_cilium_and_shows_an_unpullable_image() {
    let (cluster, client) = three_nodes().await;
    let helm = HostHelm::new(&cluster);
    install_cilium(&cluster, &helm, OLD, "").await;
    rolled_out(&client, "cilium", 3).await;
    let broken = "talos-worker-2".to_owned();
    cluster.set_image_pull_failure(NEW_IMAGE, Some(vec![broken.clone()]));

    let mut args = words("install cilium-preflight");
    args.push(package(&cluster, NEW));
    args.extend(words(
        "--namespace kube-system --set preflight.enabled=true --set agent=false --set operator.enabled=false --set k8sServiceHost=localhost --set k8sServicePort=7445",
    ));
    let out = helm.run(args).await;
    assert!(out.contains("STATUS: deployed"), "{out}");

    let check = "k8s-app=cilium-pre-flight-check";
    let stuck = common::eventually(
        60,
        "pre-flight Ready on two nodes, waiting on one",
        || async {
            let list = pods(&client, check).await;
            let (ok, waiting): (Vec<&Pod>, Vec<&Pod>) = list.iter().partition(|p| ready(p));
            let reason = waiting.first().and_then(|p| {
                p.status
                    .as_ref()?
                    .init_container_statuses
                    .as_ref()?
                    .first()?
                    .state
                    .as_ref()?
                    .waiting
                    .as_ref()?
                    .reason
                    .clone()
            });
            (ok.len() == 2
                && waiting.len() == 1
                && node_of(waiting[0]) == broken
                && matches!(reason.as_deref(), Some("ErrImagePull" | "ImagePullBackOff")))
            .then(|| waiting[0].clone())
        },
    )
    .await;
    let name = stuck.metadata.name.clone().unwrap_or_default();
    let events = common::eventually(30, "the kubelet's pull events", || async {
        let events = pod_events(&client, &name).await;
        let want = [
            format!("Failed: Failed to pull image \"{NEW_IMAGE}\": rpc error: code = NotFound"),
            "Failed: Error: ErrImagePull".to_owned(),
            format!("BackOff: Back-off pulling image \"{NEW_IMAGE}\""),
            "Failed: Error: ImagePullBackOff".to_owned(),
        ];
        want.iter()
            .all(|w| events.iter().any(|e| e.starts_with(w.as_str())))
            .then_some(events)
    })
    .await;
    assert!(
        events.iter().any(|e| e.contains("not found")),
        "the registry's answer: {events:?}"
    );
    // The running release is not touched: every agent is still 1.19.7, every CNI up.
    let agents = pods(&client, "k8s-app=cilium").await;
    assert_eq!(agents.len(), 3);
    assert!(
        agents
            .iter()
            .all(|p| ready(p) && image_of(p) == "quay.io/cilium/cilium:v1.19.7"),
        "the agents are untouched"
    );
    assert!(cluster.nodes().iter().all(|n| cluster.cni_ready(&n.name)));
    // Nothing of the release `cilium` is rendered twice: its ConfigMap is still its own.
    let config = Api::<ConfigMap>::namespaced(client.clone(), "kube-system")
        .get("cilium-config")
        .await
        .expect("cilium-config");
    let owner = config
        .metadata
        .annotations
        .unwrap_or_default()
        .get("meta.helm.sh/release-name")
        .cloned();
    assert_eq!(owner.as_deref(), Some("cilium"));

    let cleared = Instant::now();
    cluster.clear_image_pull_failure(NEW_IMAGE, None);
    rolled_out(&client, "cilium-pre-flight-check", 3).await;
    eprintln!(
        "the pre-flight recovered {:?} after the fault was cleared",
        cleared.elapsed()
    );
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "kube-system");
    common::eventually(
        60,
        "the pre-flight's policy validator available",
        || async {
            let s = deployments
                .get_opt("cilium-pre-flight-check")
                .await
                .ok()??
                .status?;
            (s.available_replicas == Some(1)).then_some(())
        },
    )
    .await;

    helm.run(words(
        "uninstall cilium-preflight --namespace kube-system --wait",
    ))
    .await;
    let daemon_sets: Api<DaemonSet> = Api::namespaced(client.clone(), "kube-system");
    common::eventually(60, "the pre-flight gone", || async {
        (daemon_sets
            .get_opt("cilium-pre-flight-check")
            .await
            .ok()?
            .is_none()
            && deployments
                .get_opt("cilium-pre-flight-check")
                .await
                .ok()?
                .is_none()
            && pods(&client, check).await.is_empty())
        .then_some(())
    })
    .await;
    rolled_out(&client, "cilium", 3).await;
    assert!(
        Api::<ConfigMap>::namespaced(client.clone(), "kube-system")
            .get_opt("cilium-config")
            .await
            .expect("reads")
            .is_some(),
        "cilium-config stays with the release cilium"
    );
}

fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// An agent restart on one node (its pod deleted, as a rollout does): that node's pod network
/// drops until the new agent is Ready, the others' stays up. With the agent image crashing there,
/// the new agent loops in `CrashLoopBackOff` with the kubelet's `BackOff` event and the node stays
/// without a CNI; clearing the crash lets the next restart bring it back.
#[tokio::test(flavor = "multi_thread")]
async fn an_agent_restart_drops_and_restores_its_nodes_pod_network() {
    let (cluster, client) = three_nodes().await;
    let helm = HostHelm::new(&cluster);
    install_cilium(&cluster, &helm, OLD, "").await;
    rolled_out(&client, "cilium", 3).await;
    let node = "talos-worker-1".to_owned();
    let image = format!("quay.io/cilium/cilium:v{OLD}");
    cluster.set_crash_loop(&image, Some(vec![node.clone()]));
    let agent = pods(&client, "k8s-app=cilium")
        .await
        .into_iter()
        .find(|p| node_of(p) == node)
        .expect("the worker's agent");
    let old_uid = agent.metadata.uid.clone();
    Api::<Pod>::namespaced(client.clone(), "kube-system")
        .delete(
            agent.metadata.name.as_deref().unwrap_or_default(),
            &DeleteParams::default(),
        )
        .await
        .expect("delete the agent");
    common::eventually(30, "the worker's pod network down", || async {
        (!cluster.cni_ready(&node)).then_some(())
    })
    .await;
    let others: Vec<String> = cluster
        .nodes()
        .iter()
        .map(|n| n.name.clone())
        .filter(|n| *n != node)
        .collect();
    assert!(
        others.iter().all(|n| cluster.cni_ready(n)),
        "the other nodes keep theirs"
    );
    let looping = common::eventually(60, "the new agent in CrashLoopBackOff", || async {
        pods(&client, "k8s-app=cilium").await.into_iter().find(|p| {
            node_of(p) == node
                && p.metadata.uid != old_uid
                && p.status
                    .as_ref()
                    .and_then(|s| s.container_statuses.as_ref())
                    .and_then(|c| c.first().cloned())
                    .is_some_and(|c| {
                        c.restart_count >= 2
                            && c.state
                                .and_then(|s| s.waiting)
                                .and_then(|w| w.reason)
                                .as_deref()
                                == Some("CrashLoopBackOff")
                    })
        })
    })
    .await;
    let name = looping.metadata.name.clone().unwrap_or_default();
    let uid = looping.metadata.uid.clone().unwrap_or_default();
    let events = pod_events(&client, &name).await;
    let backoff = format!(
        "BackOff: Back-off restarting failed container cilium-agent in pod {name}_kube-system({uid})"
    );
    assert!(events.contains(&backoff), "{backoff} in {events:?}");
    assert!(!cluster.cni_ready(&node), "no CNI while the agent crashes");
    let nodes: Api<Node> = Api::all(client.clone());
    common::eventually(30, "the worker NotReady without its CNI", || async {
        (!node_ready(&nodes.get(&node).await.ok()?)).then_some(())
    })
    .await;

    cluster.clear_crash_loop(&image, None);
    common::eventually(60, "the worker's pod network back", || async {
        cluster.cni_ready(&node).then_some(())
    })
    .await;
    rolled_out(&client, "cilium", 3).await;
    common::eventually(30, "the worker Ready again", || async {
        node_ready(&nodes.get(&node).await.ok()?).then_some(())
    })
    .await;
    let counts: BTreeMap<String, i32> = pods(&client, "k8s-app=cilium")
        .await
        .iter()
        .map(|p| {
            let restarts = p
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|c| c.first())
                .map(|c| c.restart_count)
                .unwrap_or_default();
            (node_of(p), restarts)
        })
        .collect();
    assert!(
        counts[&node] >= 2,
        "the worker's agent restarted: {counts:?}"
    );
    assert!(
        others.iter().all(|n| counts[n] == 0),
        "the others never restarted: {counts:?}"
    );
}
