//! The simulated Cilium chart renders what the real chart renders for each accepted version, its
//! images are known to the node layer, and installed with Hubble relay and UI every component
//! rolls out (one operator per node).

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use talos_sim::programs::ProgramRegistry;
use talos_sim::programs::charts::Chart;

use crate::common::*;

fn render(version: &str, values: Value) -> Vec<Value> {
    Chart::from_reference("cilium", Some(version)).render("cilium", "kube-system", &values)
}

/// `Kind/name` of every object.
fn names(objects: &[Value]) -> Vec<String> {
    objects
        .iter()
        .map(|o| {
            format!(
                "{}/{}",
                o["kind"].as_str().unwrap_or(""),
                o["metadata"]["name"].as_str().unwrap_or("")
            )
        })
        .collect()
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
}

const ACCEPTED: &[&str] = &["1.16.3", "1.17.6", "1.18.4"];

#[test]
fn every_accepted_version_renders_envoy_and_two_operators_apart_by_default() {
    for version in ACCEPTED {
        let objects = render(version, json!({}));
        let names = names(&objects);
        for expected in [
            "DaemonSet/cilium",
            "DaemonSet/cilium-envoy",
            "ConfigMap/cilium-envoy-config",
            "ServiceAccount/cilium-envoy",
            "Deployment/cilium-operator",
            "Service/hubble-peer",
        ] {
            assert!(
                names.contains(&expected.to_owned()),
                "{version}: {expected} in {names:?}"
            );
        }
        for absent in [
            "Deployment/hubble-relay",
            "Deployment/hubble-ui",
            "Deployment/clustermesh-apiserver",
        ] {
            assert!(
                !names.contains(&absent.to_owned()),
                "{version}: {absent} is off by default"
            );
        }
        let operator = find(&objects, "Deployment", "cilium-operator").expect("operator");
        assert_eq!(operator["spec"]["replicas"], 2, "{version}");
        let anti = &operator["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            [0];
        assert_eq!(anti["topologyKey"], "kubernetes.io/hostname", "{version}");
        assert_eq!(
            anti["labelSelector"]["matchLabels"]["io.cilium/app"], "operator",
            "{version}"
        );
        let envoy = find(&objects, "DaemonSet", "cilium-envoy").expect("envoy");
        let pod = &envoy["spec"]["template"];
        assert_eq!(
            pod["metadata"]["labels"]["app.kubernetes.io/part-of"],
            "cilium"
        );
        assert_eq!(pod["spec"]["hostNetwork"], true);
        let image = pod["spec"]["containers"][0]["image"].as_str().unwrap_or("");
        assert!(
            image.starts_with("quay.io/cilium/cilium-envoy:v1."),
            "{image}"
        );
        assert!(
            !pod["spec"].to_string().contains("SYS_MODULE"),
            "Talos-compatible by default"
        );
    }
}

#[test]
fn envoy_follows_the_charts_own_switches() {
    let has_envoy = |version: &str, values: Value| {
        find(&render(version, values), "DaemonSet", "cilium-envoy").is_some()
    };
    assert!(
        !has_envoy("1.15.7", json!({})),
        "embedded Envoy before 1.16"
    );
    assert!(has_envoy("1.15.7", json!({"envoy": {"enabled": true}})));
    assert!(!has_envoy("1.18.4", json!({"envoy": {"enabled": false}})));
    assert!(!has_envoy("1.18.4", json!({"l7Proxy": false})));
    assert!(
        !has_envoy("1.18.4", json!({"upgradeCompatibility": "1.15"})),
        "an upgrade from 1.15 keeps the embedded proxy"
    );
}

#[test]
fn hubble_relay_and_ui_come_with_their_services_when_enabled() {
    for version in ACCEPTED {
        let objects = render(
            version,
            json!({"hubble": {"relay": {"enabled": true}, "ui": {"enabled": true}}}),
        );
        for (kind, name) in [
            ("Deployment", "hubble-relay"),
            ("Service", "hubble-relay"),
            ("Deployment", "hubble-ui"),
            ("Service", "hubble-ui"),
        ] {
            assert!(
                find(&objects, kind, name).is_some(),
                "{version}: {kind}/{name}"
            );
        }
        let relay = find(&objects, "Deployment", "hubble-relay").expect("relay");
        assert_eq!(relay["spec"]["replicas"], 1);
        assert_eq!(
            relay["spec"]["template"]["spec"]["containers"][0]["image"],
            format!("quay.io/cilium/hubble-relay:v{version}")
        );
    }
    let broken = render(
        "1.18.4",
        json!({"envoy": {"image": {"repository": "quay.io/cilium/cilium-envoy-typo", "tag": "v1"}}}),
    );
    let envoy = find(&broken, "DaemonSet", "cilium-envoy").expect("envoy");
    assert_eq!(
        envoy["spec"]["template"]["spec"]["containers"][0]["image"],
        "quay.io/cilium/cilium-envoy-typo:v1",
        "a component's image follows its values"
    );
}

#[test]
fn every_image_the_chart_renders_is_known_to_the_node_layer() {
    let registry = ProgramRegistry::builtin();
    let everything = json!({"hubble": {"relay": {"enabled": true}, "ui": {"enabled": true}},
        "clustermesh": {"useAPIServer": true}});
    for version in ACCEPTED {
        for o in render(version, everything.clone()) {
            let spec = &o["spec"]["template"]["spec"];
            for c in ["initContainers", "containers"]
                .iter()
                .filter_map(|k| spec[k].as_array())
                .flatten()
            {
                let image = c["image"].as_str().unwrap_or("");
                assert!(
                    registry.image(image).is_some(),
                    "{version}: {image} of {}",
                    o["metadata"]["name"]
                );
            }
        }
    }
}

#[tokio::test]
async fn with_hubble_relay_and_ui_every_component_rolls_out_one_operator_per_node() {
    let (_sim, client) = start().await;
    let mut sets = talos_cilium_sets();
    sets.push("hubble.relay.enabled=true".into());
    sets.push("hubble.ui.enabled=true".into());
    let job = bootstrap_job(
        "cilium-install",
        "quay.io/cilium/cilium-cli:v0.18.7",
        &cilium_install(&sets),
        kubeprism_env(),
    );
    let done = run_job(&client, "kube-system", &job, 20).await;
    assert!(
        job_condition(&done, "Complete").is_some(),
        "{:?}",
        done.status
    );
    wait_nodes_ready(&client).await;
    let dss: Api<DaemonSet> = Api::namespaced(client.clone(), "kube-system");
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), "kube-system");
    for name in ["cilium", "cilium-envoy"] {
        eventually(20, &format!("DaemonSet {name} rolled out"), || async {
            let s = dss.get(name).await.ok()?.status?;
            (s.desired_number_scheduled == 2
                && s.number_ready == 2
                && s.number_available == Some(2))
            .then_some(())
        })
        .await;
    }
    for (name, replicas) in [
        ("cilium-operator", 2),
        ("hubble-relay", 1),
        ("hubble-ui", 1),
    ] {
        eventually(20, &format!("Deployment {name} available"), || async {
            let s = deploys.get(name).await.ok()?.status?;
            (s.available_replicas == Some(replicas)).then_some(())
        })
        .await;
    }
    let services: Api<Service> = Api::namespaced(client.clone(), "kube-system");
    for name in ["hubble-peer", "hubble-relay", "hubble-ui"] {
        assert!(services.get(name).await.is_ok(), "Service {name}");
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    let operators = pods
        .list(&ListParams::default().labels("io.cilium/app=operator"))
        .await
        .expect("operator pods");
    let mut nodes: Vec<String> = operators
        .items
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    nodes.sort();
    nodes.dedup();
    assert_eq!(nodes.len(), 2, "one operator per node (anti-affinity)");
}
