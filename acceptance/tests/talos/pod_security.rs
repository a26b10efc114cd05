//! Pod Security on the real control plane as Talos configures it (baseline enforced by default,
//! kube-system exempt): the real evaluator's messages, namespace labels winning over the default,
//! and a host-network Job refused (FailedCreate, retried) until its namespace is privileged.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ListParams, LogParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::common::{self, eventually, from_json};

fn pod(name: &str, spec: Value) -> Pod {
    from_json(json!({"metadata": {"name": name}, "spec": spec}))
}

fn host_pod(name: &str) -> Pod {
    pod(
        name,
        json!({"hostNetwork": true, "containers": [{"name": "c", "image": "busybox:1.36"}]}),
    )
}

fn api_error(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("not an API error: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn pod_security_levels_and_a_job_refused_until_its_namespace_is_privileged() {
    let (_cluster, client) = common::shared().await;
    let post = PostParams::default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");

    // A server-side dry run answers as a create would (a client can check before creating a Job).
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let e = api_error(pods.create(&dry, &host_pod("x")).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        e.message,
        "pods \"x\" is forbidden: violates PodSecurity \"baseline:latest\": host namespaces (hostNetwork=true)"
    );
    // Several violations, in the evaluator's order, joined with ", ".
    let bad = pod(
        "y",
        json!({"hostNetwork": true, "hostPID": true,
               "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
               "containers": [{"name": "c", "image": "busybox:1",
                   "securityContext": {"privileged": true, "capabilities": {"add": ["NET_ADMIN", "CHOWN"]}},
                   "ports": [{"containerPort": 80, "hostPort": 80}]}]}),
    );
    let e = api_error(pods.create(&post, &bad).await.unwrap_err());
    assert_eq!(
        e.message,
        "pods \"y\" is forbidden: violates PodSecurity \"baseline:latest\": non-default capabilities (container \"c\" must not include \"NET_ADMIN\" in securityContext.capabilities.add), host namespaces (hostNetwork=true, hostPID=true), hostPath volumes (volume \"root\"), hostPort (container \"c\" uses hostPort 80), privileged (container \"c\" must not set securityContext.privileged=true)"
    );

    // Namespace labels win over the default, both ways.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &post,
            &from_json(json!({"metadata": {"name": "strict", "labels": {
                "pod-security.kubernetes.io/enforce": "restricted",
                "pod-security.kubernetes.io/enforce-version": "latest"}}})),
        )
        .await
        .unwrap();
    common::privileged_namespace(&client, "open").await;
    eventually(30, "default ServiceAccount in strict", || async {
        Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(client.clone(), "strict")
            .get_opt("default")
            .await
            .ok()
            .flatten()
    })
    .await;
    Api::<Pod>::namespaced(client.clone(), "open")
        .create(&post, &host_pod("x"))
        .await
        .expect("a privileged namespace admits host networking");
    let plain = pod(
        "plain",
        json!({"containers": [{"name": "c", "image": "busybox:1"}]}),
    );
    let e = api_error(
        Api::<Pod>::namespaced(client.clone(), "strict")
            .create(&post, &plain)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        e.message,
        "pods \"plain\" is forbidden: violates PodSecurity \"restricted:latest\": allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]), runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container \"c\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"
    );
    pods.create(&post, &plain)
        .await
        .expect("baseline admits it");
    // A level that is not a level is refused.
    let e = api_error(
        namespaces
            .patch(
                "open",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "strict"}}}),
                ),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 422, "{e:?}");
    assert_eq!(
        e.message,
        "Namespace \"open\" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"strict\": must be one of privileged, baseline, restricted"
    );

    // A host-network Job in a baseline namespace: the Job controller's creates are refused
    // (FailedCreate), retried and not counted as failures; labelling the namespace lets it run.
    common::privileged_namespace(&client, "later").await;
    namespaces
        .patch(
            "later",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "baseline"}}}),
            ),
        )
        .await
        .unwrap();
    let jobs: Api<Job> = Api::namespaced(client.clone(), "later");
    let job: Job = from_json(
        json!({"metadata": {"name": "boot"}, "spec": {"backoffLimit": 0,
        "template": {"spec": {"hostNetwork": true, "restartPolicy": "Never",
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "c", "image": "busybox:1.36", "command": ["sh", "-c", "echo done"]}]}}}}),
    );
    jobs.create(&post, &job).await.unwrap();
    let message = eventually(60, "FailedCreate event", || async {
        common::events(&client, "later", "boot")
            .await
            .into_iter()
            .find_map(|e| e.strip_prefix("FailedCreate: ").map(str::to_owned))
    })
    .await;
    let rest = message
        .strip_prefix("Error creating: pods \"boot-")
        .unwrap_or_else(|| panic!("{message}"));
    assert_eq!(
        &rest[5..],
        "\" is forbidden: violates PodSecurity \"baseline:latest\": host namespaces (hostNetwork=true)",
        "{message}"
    );
    let j = jobs.get("boot").await.unwrap();
    assert_eq!(j.status.and_then(|s| s.failed).unwrap_or(0), 0);
    namespaces
        .patch(
            "later",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "privileged"}}})),
        )
        .await
        .unwrap();
    // The real Job controller backs its retries off exponentially: the next try after the label
    // can be minutes away (the old simulator retried within seconds). A new Job runs at once.
    jobs.delete("boot", &kube::api::DeleteParams::background())
        .await
        .unwrap();
    eventually(60, "the refused Job is gone", || async {
        jobs.get_opt("boot").await.ok()?.is_none().then_some(())
    })
    .await;
    jobs.create(&post, &job).await.unwrap();
    eventually(90, "job complete", || async {
        let j = jobs.get("boot").await.ok()?;
        j.status?
            .conditions?
            .iter()
            .any(|c| c.type_ == "Complete" && c.status == "True")
            .then_some(())
    })
    .await;
    let later: Api<Pod> = Api::namespaced(client.clone(), "later");
    let pod = later
        .list(&ListParams::default().labels("job-name=boot"))
        .await
        .unwrap()
        .items
        .into_iter()
        .next()
        .expect("the job's pod");
    let log = later
        .logs(pod.metadata.name.as_deref().unwrap(), &LogParams::default())
        .await
        .unwrap();
    assert_eq!(log, "done\n");
}
