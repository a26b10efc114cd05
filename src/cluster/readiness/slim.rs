//! What readiness keeps of the objects it reads: the fields that judge a rollout, a node or a
//! pod, not whole objects. On a real cluster most of an object's size is what no judge reads: a
//! workload's pod template, a node's image list (often a hundred images), every object's
//! `managedFields`. The wait holds every DaemonSet, Deployment, StatefulSet and Job of the
//! namespace, every node and the chart's pods for as long as it waits, and a refresh lists the
//! namespace's workloads and the nodes: whole objects would make the provider's memory grow with
//! the cluster instead of with what it judges.
//!
//! Two ways in: [`Slim`] trims an object the watch has already decoded (the watch needs
//! `kube::Resource` types), before it enters the wait's cache; the lists of a refresh decode only
//! the judged fields ([`Lean`]), so a whole list of whole objects is never built.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    DaemonSet, DaemonSetStatus, Deployment, DeploymentSpec, DeploymentStatus, StatefulSet,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, Pod, PodSpec, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde::de::DeserializeOwned;

/// Trims an object to what the wait reads of it.
pub(super) trait Slim {
    fn slim(&mut self);
}

impl Slim for DaemonSet {
    fn slim(&mut self) {
        self.metadata.managed_fields = None;
        if let Some(spec) = &mut self.spec {
            spec.template = Default::default();
        }
    }
}

impl Slim for Deployment {
    fn slim(&mut self) {
        self.metadata.managed_fields = None;
        if let Some(spec) = &mut self.spec {
            spec.template = Default::default();
        }
    }
}

impl Slim for StatefulSet {
    fn slim(&mut self) {
        self.metadata.managed_fields = None;
        if let Some(spec) = &mut self.spec {
            spec.template = Default::default();
            spec.volume_claim_templates = None;
        }
    }
}

impl Slim for Job {
    fn slim(&mut self) {
        self.metadata.managed_fields = None;
        if let Some(spec) = &mut self.spec {
            spec.template = Default::default();
        }
    }
}

impl Slim for Node {
    fn slim(&mut self) {
        self.metadata.managed_fields = None;
        if let Some(status) = &mut self.status {
            status.images = None;
            status.volumes_attached = None;
            status.volumes_in_use = None;
        }
    }
}

impl Slim for Pod {
    /// A pod is judged by its status, its owner and labels, and the node it was scheduled to.
    fn slim(&mut self) {
        self.metadata.managed_fields = None;
        if let Some(spec) = &mut self.spec {
            *spec = PodSpec {
                node_name: spec.node_name.take(),
                ..Default::default()
            };
        }
    }
}

/// The object a list of lean items stands for, rebuilt from what was decoded.
pub(super) trait Lean: DeserializeOwned {
    type Full;
    fn into_full(self) -> Self::Full;
}

/// A list response, its items decoded as `T`.
#[derive(Deserialize)]
pub(super) struct List<T> {
    pub items: Vec<T>,
}

/// The metadata the judges and the ownership checks read.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Meta {
    name: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
}

impl From<Meta> for ObjectMeta {
    fn from(m: Meta) -> ObjectMeta {
        ObjectMeta {
            name: m.name,
            generation: m.generation,
            labels: m.labels,
            annotations: m.annotations,
            ..Default::default()
        }
    }
}

#[derive(Deserialize)]
pub(super) struct LeanDaemonSet {
    #[serde(default)]
    metadata: Meta,
    status: Option<DaemonSetStatus>,
}

impl Lean for LeanDaemonSet {
    type Full = DaemonSet;
    fn into_full(self) -> DaemonSet {
        DaemonSet {
            metadata: self.metadata.into(),
            spec: None,
            status: self.status,
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Replicas {
    replicas: Option<i32>,
}

#[derive(Deserialize)]
pub(super) struct LeanDeployment {
    #[serde(default)]
    metadata: Meta,
    spec: Option<Replicas>,
    status: Option<DeploymentStatus>,
}

impl Lean for LeanDeployment {
    type Full = Deployment;
    fn into_full(self) -> Deployment {
        Deployment {
            metadata: self.metadata.into(),
            spec: self.spec.map(|s| DeploymentSpec {
                replicas: s.replicas,
                ..Default::default()
            }),
            status: self.status,
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Taints {
    taints: Option<Vec<Taint>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Conditions {
    conditions: Option<Vec<NodeCondition>>,
}

#[derive(Deserialize)]
pub(super) struct LeanNode {
    #[serde(default)]
    metadata: Meta,
    spec: Option<Taints>,
    status: Option<Conditions>,
}

impl Lean for LeanNode {
    type Full = Node;
    fn into_full(self) -> Node {
        Node {
            metadata: self.metadata.into(),
            spec: self.spec.map(|s| NodeSpec {
                taints: s.taints,
                ..Default::default()
            }),
            status: self.status.map(|s| NodeStatus {
                conditions: s.conditions,
                ..Default::default()
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value as Json, json};

    use super::super::rollout::{daemonset_rollout, deployment_rollout, node_not_ready};
    use super::*;

    /// What a real API server adds to every object: server-side apply's field ownership.
    fn managed_fields() -> Json {
        json!([{"manager": "helm", "operation": "Apply", "apiVersion": "v1",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:template": {"f:spec": {}}}}}])
    }

    /// A pod template as large as Cilium's agent has, in shape.
    fn template() -> Json {
        let containers: Vec<Json> = (0..4)
            .map(|i| json!({"name": format!("c{i}"), "image": "quay.io/cilium/cilium:v1.20.2",
                            "env": (0..30).map(|e| json!({"name": format!("E{e}"), "value": "x"})).collect::<Vec<_>>()}))
            .collect();
        json!({"metadata": {"labels": {"k8s-app": "cilium"}},
               "spec": {"hostNetwork": true, "containers": containers}})
    }

    fn daemonset(name: &str, generation: i64, observed: i64, ready: i32) -> Json {
        json!({"metadata": {"name": name, "generation": generation, "labels": {"app": name},
                            "annotations": {"meta.helm.sh/release-name": "cilium"},
                            "managedFields": managed_fields()},
               "spec": {"selector": {}, "template": template()},
               "status": {"desiredNumberScheduled": 3, "numberReady": ready, "updatedNumberScheduled": 3,
                          "numberAvailable": ready, "currentNumberScheduled": 3,
                          "numberMisscheduled": 0, "observedGeneration": observed}})
    }

    fn deployment(name: &str, replicas: Option<i32>, available: i32) -> Json {
        let mut spec = json!({"selector": {}, "template": template()});
        if let Some(r) = replicas {
            spec["replicas"] = json!(r);
        }
        json!({"metadata": {"name": name, "generation": 2, "managedFields": managed_fields()},
               "spec": spec,
               "status": {"observedGeneration": 2, "readyReplicas": available,
                          "availableReplicas": available, "updatedReplicas": available}})
    }

    fn node(name: &str, ready: &str, taint: Option<&str>) -> Json {
        let taints: Vec<Json> = taint
            .map(|effect| json!({"key": "node.kubernetes.io/not-ready", "effect": effect}))
            .into_iter()
            .collect();
        let images: Vec<Json> = (0..100)
            .map(|i| json!({"names": [format!("registry.example/image-{i}@sha256:0123456789abcdef")], "sizeBytes": 1}))
            .collect();
        json!({"metadata": {"name": name, "managedFields": managed_fields()},
               "spec": {"taints": taints, "podCIDR": "10.244.0.0/24"},
               "status": {"conditions": [{"type": "Ready", "status": ready, "message": "kubelet says so"}],
                          "images": images, "nodeInfo": {"kubeletVersion": "v1.37.2", "architecture": "amd64",
                          "bootID": "", "containerRuntimeVersion": "", "kernelVersion": "", "kubeProxyVersion": "",
                          "machineID": "", "operatingSystem": "linux", "osImage": "Talos", "systemUUID": ""}}})
    }

    fn lean<L: Lean>(items: &[Json]) -> Vec<L::Full> {
        let list: List<L> =
            serde_json::from_value(json!({"kind": "List", "items": items})).expect("lean list");
        list.items.into_iter().map(Lean::into_full).collect()
    }

    fn full<T: DeserializeOwned>(item: &Json) -> T {
        serde_json::from_value(item.clone()).expect("whole object")
    }

    #[test]
    fn a_lean_list_judges_each_object_as_the_whole_object_does() {
        let daemonsets = [
            daemonset("cilium", 3, 3, 3),
            daemonset("cilium-envoy", 2, 1, 3),
            daemonset("x", 1, 1, 1),
        ];
        for (lean, item) in lean::<LeanDaemonSet>(&daemonsets).iter().zip(&daemonsets) {
            let whole: DaemonSet = full(item);
            assert_eq!(daemonset_rollout(lean), daemonset_rollout(&whole), "{item}");
            assert_eq!(lean.metadata.name, whole.metadata.name);
            assert_eq!(lean.metadata.labels, whole.metadata.labels);
            assert_eq!(lean.metadata.annotations, whole.metadata.annotations);
        }
        // Without `replicas` a Deployment wants one: the lean form must not lose that default.
        let deployments = [
            deployment("cilium-operator", Some(2), 2),
            deployment("hubble-relay", None, 0),
            deployment("d", Some(3), 1),
        ];
        for (lean, item) in lean::<LeanDeployment>(&deployments)
            .iter()
            .zip(&deployments)
        {
            let whole: Deployment = full(item);
            assert_eq!(
                deployment_rollout(lean),
                deployment_rollout(&whole),
                "{item}"
            );
        }
        let nodes = [
            node("ready", "True", None),
            node("tainted", "True", Some("NoSchedule")),
            node("lifting", "True", Some("NoExecute")),
            node("down", "False", None),
        ];
        for (lean, item) in lean::<LeanNode>(&nodes).iter().zip(&nodes) {
            let whole: Node = full(item);
            assert_eq!(node_not_ready(lean), node_not_ready(&whole), "{item}");
        }
        assert_eq!(
            lean::<LeanNode>(&nodes)
                .iter()
                .map(|n| node_not_ready(n).is_none())
                .collect::<Vec<_>>(),
            [true, false, true, false]
        );
    }

    fn size<T: serde::Serialize>(o: &T) -> usize {
        serde_json::to_vec(o).expect("json").len()
    }

    #[test]
    fn what_the_wait_keeps_is_judged_as_the_whole_object_and_is_a_fraction_of_it() {
        let mut ds: DaemonSet = full(&daemonset("cilium", 3, 2, 3));
        let before = (daemonset_rollout(&ds), size(&ds));
        ds.slim();
        assert_eq!(daemonset_rollout(&ds), before.0);
        assert!(
            size(&ds) * 4 < before.1,
            "{} of {} bytes kept",
            size(&ds),
            before.1
        );
        assert!(ds.metadata.managed_fields.is_none() && ds.metadata.labels.is_some());

        let mut d: Deployment = full(&deployment("cilium-operator", Some(2), 1));
        let before = (deployment_rollout(&d), size(&d));
        d.slim();
        assert_eq!(deployment_rollout(&d), before.0);
        assert!(size(&d) * 4 < before.1);

        let mut n: Node = full(&node("tainted", "True", Some("NoSchedule")));
        let before = (node_not_ready(&n), size(&n));
        n.slim();
        assert_eq!(node_not_ready(&n), before.0);
        assert!(before.0.is_some());
        assert!(
            size(&n) * 4 < before.1,
            "{} of {} bytes kept",
            size(&n),
            before.1
        );

        let mut pod: Pod = full(&json!({
            "metadata": {"name": "cilium-abc", "labels": {"pod-template-generation": "3"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "cilium", "uid": "u", "controller": true}],
                         "managedFields": managed_fields()},
            "spec": template()["spec"].clone().as_object().cloned().map(|mut s| { s.insert("nodeName".into(), json!("worker-1")); Json::Object(s) }).expect("spec"),
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}],
                       "containerStatuses": [{"name": "c0", "image": "i", "imageID": "", "ready": false, "restartCount": 4,
                                              "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}
        }));
        let before = size(&pod);
        let status = pod.status.clone();
        pod.slim();
        assert!(size(&pod) * 4 < before);
        assert_eq!(
            pod.spec.as_ref().and_then(|s| s.node_name.as_deref()),
            Some("worker-1")
        );
        assert_eq!(pod.status, status, "the status is what a pod is judged by");
        assert!(pod.metadata.owner_references.is_some() && pod.metadata.labels.is_some());
    }
}
