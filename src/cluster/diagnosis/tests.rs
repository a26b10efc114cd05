//! Tests of the diagnosis table: each known failure and the fix it names, as a user reads them.

use super::*;

#[test]
fn a_known_failure_reads_as_the_table_would_read_its_text() {
    let message = "namespace apps enforces Pod Security \"baseline\", which refuses the bootstrap pod: violates PodSecurity \"baseline:latest\": host namespaces (hostNetwork=true)";
    let read = diagnose([message]).expect("the table reads the message");
    assert_eq!(
        Diagnosis::known(Signature::PodSecurity, message),
        Some(read)
    );
}

#[test]
fn the_service_ip_timeout_points_at_the_endpoint_override() {
    let log = "Error: Kubernetes cluster unreachable: Get \"https://10.96.0.1:443/version\": dial tcp 10.96.0.1:443: i/o timeout";
    let d = diagnose([log]).expect("known");
    assert!(d.fix.contains("api_endpoint"));
    assert!(d.signature.contains("10.96.0.1:443"));
}

#[test]
fn the_service_ip_timeout_is_judged_with_the_clusters_own_service_ip() {
    // A cluster with Service CIDR 10.100.0.0/16: the `kubernetes` Service is 10.100.0.1.
    let log = "Error: Kubernetes cluster unreachable: Get \"https://10.100.0.1:443/version\": dial tcp 10.100.0.1:443: i/o timeout";
    let mut d = diagnose([log]).expect("known");
    assert_eq!(
        d.kind,
        Signature::EndpointTimeout,
        "before the address is read"
    );
    d.judge_service_ip("10.100.0.1");
    assert_eq!(d.kind, Signature::ServiceIpTimeout);
    assert!(d.is_permanent());
    assert!(d.signature.contains("10.100.0.1:443"), "{}", d.signature);
    assert!(d.cause.contains("Service IP (10.100.0.1)"), "{}", d.cause);
    assert!(d.fix.contains("api_endpoint"), "{}", d.fix);
    // On that cluster 10.96.0.1 is no Service address: a dial to it is the endpoint's.
    let mut default = diagnose(["dial tcp 10.96.0.1:443: i/o timeout"]).expect("known");
    assert_eq!(default.kind, Signature::ServiceIpTimeout);
    default.judge_service_ip("10.100.0.1");
    assert_eq!(default.kind, Signature::EndpointTimeout);
    assert!(
        default.fix.contains("check `api_endpoint`"),
        "{}",
        default.fix
    );
    // IPv6 Service CIDRs: the dial names the address in brackets.
    let mut v6 = diagnose(["dial tcp [fd00:10:96::1]:443: i/o timeout"]).expect("known");
    v6.judge_service_ip("fd00:10:96::1");
    assert_eq!(v6.kind, Signature::ServiceIpTimeout);
    // The default CIDR stays the Service-IP timeout; other diagnoses are left alone.
    let mut same = diagnose(["dial tcp 10.96.0.1:443: i/o timeout"]).expect("known");
    same.judge_service_ip(DEFAULT_SERVICE_IP);
    assert_eq!(same.kind, Signature::ServiceIpTimeout);
    assert!(
        same.cause.contains("Service IP (10.96.0.1)"),
        "{}",
        same.cause
    );
    // Worded for the cluster's kube-proxy afterwards, the cause still names the address.
    d.explain_service_ip(KubeProxy::Absent);
    assert!(
        d.cause.contains("Service IP (10.100.0.1)") && d.cause.contains("kube-proxy is disabled"),
        "{}",
        d.cause
    );
    d.judge_service_ip("10.100.0.1");
    assert_eq!(
        d.cause.matches("10.100.0.1").count(),
        1,
        "named once: {}",
        d.cause
    );
    let mut pull = diagnose(["ErrImagePull"]).expect("known");
    let before = pull.clone();
    pull.judge_service_ip("10.100.0.1");
    assert_eq!(pull, before);
}

#[test]
fn an_image_pull_failure_names_the_setting_of_the_image_that_failed() {
    let agent = diagnose([
            "pod cilium-x on worker-1 (Pending): cilium-agent: waiting (ImagePullBackOff: Back-off pulling image \"quay.io/cilium/cilium:v1.20.2\": ErrImagePull: not found)",
        ])
        .expect("known");
    assert!(
        agent
            .fix
            .contains("`quay.io/cilium/cilium:v1.20.2` is an image the chart runs")
            && agent.fix.contains("image.repository")
            && !agent.fix.contains("job.image"),
        "{}",
        agent.fix
    );
    let installer =
        diagnose(["Failed to pull image \"docker.io/alpine/helm:4.3.2\": ErrImagePull: timeout"])
            .expect("known");
    assert!(
        installer.fix.contains("`job.image`") && installer.fix.contains("alpine/helm:4.3.2"),
        "{}",
        installer.fix
    );
    let unnamed = diagnose(["ErrImagePull"]).expect("known");
    assert!(
        unnamed.fix.contains("`job.image`") && unnamed.fix.contains("image.repository"),
        "{}",
        unnamed.fix
    );
}

#[test]
fn the_real_schedulers_untolerated_taints_mean_no_node_is_ready() {
    // kube-scheduler 1.37 with a control plane (role and not-ready taints) and a worker.
    let event = "FailedScheduling: 0/2 nodes are available: 2 node(s) had untolerated taint(s). preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.";
    let d = diagnose([event]).expect("known");
    assert!(d.cause.starts_with("no node is Ready"), "{}", d.cause);
    assert!(d.fix.contains("depends_on"), "{}", d.fix);
}

#[test]
fn the_service_ip_timeout_says_kube_proxy_is_disabled_only_when_it_is() {
    let log = "dial tcp 10.96.0.1:443: i/o timeout";
    let neutral = diagnose([log]).expect("known");
    assert_eq!(neutral.kind, Signature::ServiceIpTimeout);
    assert!(!neutral.cause.contains("disabled"), "{}", neutral.cause);
    let mut absent = neutral.clone();
    absent.explain_service_ip(KubeProxy::Absent);
    assert!(
        absent
            .cause
            .contains("kube-proxy is disabled in this cluster"),
        "{}",
        absent.cause
    );
    let mut deployed = neutral.clone();
    deployed.explain_service_ip(KubeProxy::Deployed);
    assert!(
        !deployed.cause.contains("disabled")
            && deployed.cause.contains("although kube-proxy is deployed"),
        "{}",
        deployed.cause
    );
    assert!(
        deployed.fix.contains("k8s-app=kube-proxy"),
        "{}",
        deployed.fix
    );
    let mut other = diagnose(["ErrImagePull"]).expect("known");
    let before = other.clone();
    other.explain_service_ip(KubeProxy::Absent);
    assert_eq!(other, before, "other diagnoses are left alone");
}

#[test]
fn ownership_names_both_inline_manifest_forms_and_the_prune() {
    let d = diagnose([
            "Error: Unable to continue with install: ServiceAccount \"cilium\" in namespace \"kube-system\" exists and cannot be imported into the current release: invalid ownership metadata",
        ])
        .expect("known");
    assert_eq!(d.kind, Signature::Ownership);
    for form in [
        "`cluster.inlineManifests` (Talos 1.13 and earlier)",
        "`KubeInlineManifestConfig` document per manifest (Talos 1.14+)",
    ] {
        assert!(d.cause.contains(form), "{form}: {}", d.cause);
    }
    assert!(d.fix.contains("Talos 1.13+ prunes"), "{}", d.fix);
}

#[test]
fn helm_4_refusals_and_conflicts_are_named() {
    // As the installer words them (the Helm module's `Refusal::message`, out of reach here).
    let refused = diagnose([
            "talosboot refused the install: the installer image alpine/helm:3.18.4 carries Helm 3, and the newest record of release kube-system/cilium (revision 3) says apply_method: ssa. Helm 3 applies client-side only and would switch the release to client-side apply for good.",
        ])
        .expect("known");
    assert_eq!(refused.kind, Signature::ApplyMethodSwitch);
    assert!(
        refused.fix.contains("job.apply_method = \"csa\""),
        "{}",
        refused.fix
    );
    let no_ssa = diagnose([
            "talosboot refused the install: job.apply_method is \"ssa\", but the installer image alpine/helm:3.18.4 carries Helm 3, which has no server-side apply (release kube-system/cilium).",
        ])
        .expect("known");
    assert_eq!(no_ssa.kind, Signature::ApplyMethodSwitch);
    assert!(
        no_ssa.cause.contains("no server-side apply"),
        "{}",
        no_ssa.cause
    );
    let conflict = diagnose([
            "Error: UPGRADE FAILED: conflict occurred while applying object kube-system/cilium-config /v1, Kind=ConfigMap: Apply failed with 1 conflict: conflict with \"talos\": .data.debug",
        ])
        .expect("known");
    assert_eq!(conflict.kind, Signature::FieldConflict);
    assert!(
        conflict.fix.contains("adopt_existing = true"),
        "{}",
        conflict.fix
    );
}

#[test]
fn kubeprism_refused_is_not_mistaken_for_a_timeout() {
    let d = diagnose(["dial tcp 127.0.0.1:7445: connect: connection refused"]).expect("known");
    assert!(d.cause.contains("KubePrism"));
    // How to turn it back on, in each machine-config form with the Talos versions it is for.
    for form in [
        "`machine.features.kubePrism: { enabled: true, port: 7445 }` (Talos 1.6 to 1.13",
        "`KubePrismConfig` document with `port: 7445` (Talos 1.14+",
    ] {
        assert!(d.fix.contains(form), "{form}: {}", d.fix);
    }
    assert!(
        d.cause
            .contains("no `KubePrismConfig` document (Talos 1.14+"),
        "{}",
        d.cause
    );
}

#[test]
fn every_known_signature_is_recognised() {
    let cases = [
        (
            "failed to create containerd task: unable to apply caps: operation not permitted: unknown",
            "SYS_MODULE",
        ),
        (
            "nsenter: failed to execute /opt/cni/bin/cilium-mount: Permission denied",
            "cgroup",
        ),
        (
            "Error: INSTALLATION FAILED: cannot re-use a name that is still in use",
            "release of this name",
        ),
        (
            "Error: UPGRADE FAILED: another operation (install/upgrade/rollback) is in progress",
            "locked",
        ),
        (
            "Error: rendered manifests contain a resource that already exists. Unable to continue with install: ServiceAccount \"cilium\" in namespace \"kube-system\" exists and cannot be imported into the current release: invalid ownership metadata",
            "ownership",
        ),
        ("Back-off pulling image \"x\": ImagePullBackOff", "pulled"),
        (
            "tls: failed to verify certificate: x509: certificate signed by unknown authority",
            "TLS",
        ),
        (
            "pods \"p\" is forbidden: violates PodSecurity \"baseline:latest\": host namespaces (hostNetwork=true)",
            "Pod Security",
        ),
        (
            "secrets is forbidden: User \"system:serviceaccount:a:b\" cannot create resource",
            "permission",
        ),
        (
            "network is not ready: container runtime network not ready",
            "pod network",
        ),
        (
            "Job was active longer than specified deadline (DeadlineExceeded)",
            "timeout",
        ),
        (
            "0/3 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }, 2 node(s) had untolerated taint(s).",
            "unreachable",
        ),
        (
            "0/3 nodes are available: 3 node(s) had untolerated taint {node.kubernetes.io/not-ready: }.",
            "not-ready taint",
        ),
    ];
    for (text, cause_word) in cases {
        let d = diagnose([text]).unwrap_or_else(|| panic!("{text} not recognised"));
        assert!(d.cause.contains(cause_word), "{text}: {}", d.cause);
    }
    assert_eq!(diagnose(["all good"]), None);
}

#[test]
fn a_refusal_names_the_missing_verb_and_resource() {
    let log = "Error: INSTALLATION FAILED: failed to create ClusterRole \"cilium\": clusterroles.rbac.authorization.k8s.io is forbidden: User \"system:serviceaccount:kube-system:talosboot-x\" cannot create resource \"clusterroles\" in API group \"rbac.authorization.k8s.io\" at the cluster scope";
    let d = diagnose([log]).expect("known");
    assert!(
        d.cause.contains("`create` resource `clusterroles`"),
        "{}",
        d.cause
    );
    assert!(d.cause.contains("at the cluster scope"), "{}", d.cause);
    assert!(
        d.fix.contains("verb `create` on resource `clusterroles`"),
        "{}",
        d.fix
    );
    let f = parse_forbidden("secrets is forbidden: User \"system:serviceaccount:a:b\" cannot list resource \"secrets\" in API group \"\" in the namespace \"kube-system\"").expect("parses");
    assert_eq!(
        (
            f.verb.as_str(),
            f.resource.as_str(),
            f.group.as_str(),
            f.namespace.as_deref()
        ),
        ("list", "secrets", "", Some("kube-system"))
    );
    let e = diagnose(["clusterroles.rbac.authorization.k8s.io \"cilium\" is forbidden: user \"u\" (groups=[\"g\"]) is attempting to grant RBAC permissions not currently held:"]).expect("known");
    assert!(e.fix.contains("escalate"), "{}", e.fix);
}
