//! Jobs: defaulting on create, `spec.template` immutability, default orphaning.

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::{start, status};

fn job(image: &str) -> serde_json::Value {
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "bootstrap"},
        "spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never", "hostNetwork": true,
            "containers": [{"name": "run", "image": image, "env": [{"name": "KUBERNETES_SERVICE_HOST", "value": "localhost"}]}]}}}})
}

#[tokio::test]
async fn job_is_defaulted_like_the_real_server() {
    let (_sim, client) = start().await;
    let api: Api<Job> = Api::namespaced(client, "default");
    let j = api
        .create(
            &PostParams::default(),
            &serde_json::from_value(job("busybox:1")).unwrap(),
        )
        .await
        .unwrap();
    let uid = j.metadata.uid.clone().unwrap();
    let spec = j.spec.unwrap();
    let labels = spec.template.metadata.unwrap().labels.unwrap();
    assert_eq!(labels["job-name"], "bootstrap");
    assert_eq!(labels["batch.kubernetes.io/job-name"], "bootstrap");
    assert_eq!(labels["controller-uid"], uid);
    assert_eq!(labels["batch.kubernetes.io/controller-uid"], uid);
    assert_eq!(
        spec.selector.unwrap().match_labels.unwrap()["batch.kubernetes.io/controller-uid"],
        uid
    );
    assert_eq!(spec.backoff_limit, Some(0));
    assert_eq!(spec.completions, Some(1));
}

#[tokio::test]
async fn job_template_is_immutable() {
    let (_sim, client) = start().await;
    let api: Api<Job> = Api::namespaced(client, "default");
    api.patch(
        "bootstrap",
        &PatchParams::apply("tf"),
        &Patch::Apply(job("busybox:1")),
    )
    .await
    .unwrap();
    // re-applying the same manifest is fine
    api.patch(
        "bootstrap",
        &PatchParams::apply("tf"),
        &Patch::Apply(job("busybox:1")),
    )
    .await
    .unwrap();
    let e = status(
        api.patch(
            "bootstrap",
            &PatchParams::apply("tf"),
            &Patch::Apply(job("busybox:2")),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert!(
        e.message
            .starts_with("Job.batch \"bootstrap\" is invalid: spec.template: Invalid value: "),
        "{}",
        e.message
    );
    assert!(e.message.ends_with("field is immutable"), "{}", e.message);
    let d = e.details.unwrap();
    assert_eq!((d.kind.as_str(), d.group.as_str()), ("Job", "batch"));
    assert_eq!(d.causes[0].field, "spec.template");
    let e = status(
        api.patch(
            "bootstrap",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"hostNetwork": false}}}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 422);
    // metadata stays mutable
    api.patch(
        "bootstrap",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn job_needs_a_valid_restart_policy() {
    let (_sim, client) = start().await;
    let api: Api<Job> = Api::namespaced(client, "default");
    let mut j = job("busybox:1");
    j["spec"]["template"]["spec"]["restartPolicy"] = json!("Always");
    let e = status(
        api.create(&PostParams::default(), &serde_json::from_value(j).unwrap())
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 422);
    assert!(
        e.message
            .contains("spec.template.spec.restartPolicy: Unsupported value: \"Always\""),
        "{}",
        e.message
    );
}
