//! The known failure signatures of a pre-CNI bootstrap, each with its cause and the fix in one
//! sentence. The table is matched against everything a failed run left behind: the container log
//! tail, container state messages and events. The first matching row wins, so more specific
//! signatures come first.

/// What a signature means and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnosis {
    /// The text that was recognised, as it appeared.
    pub signature: String,
    pub cause: &'static str,
    pub fix: &'static str,
}

struct Row {
    /// All of these must appear (case-sensitive, as the tools print them).
    all: &'static [&'static str],
    cause: &'static str,
    fix: &'static str,
}

const TABLE: &[Row] = &[
    Row {
        all: &["violates PodSecurity"],
        cause: "the namespace's Pod Security level forbids the bootstrap pod (Talos enforces `baseline` everywhere but kube-system, and host networking needs `privileged`)",
        fix: "label the bootstrap namespace `pod-security.kubernetes.io/enforce=privileged`, or use a bootstrap namespace that talosboot creates (it labels it itself)",
    },
    Row {
        all: &["unable to apply caps: operation not permitted"],
        cause: "a container requested the SYS_MODULE capability, which Talos forbids for every process",
        fix: "remove SYS_MODULE from `securityContext.capabilities.ciliumAgent` and `cleanCiliumState` (leave `talos_defaults = true` and do not override those lists)",
    },
    Row {
        all: &["cilium-mount", "Permission denied"],
        cause: "Cilium tried to mount the cgroup2 filesystem itself, which Talos does not allow",
        fix: "set `cgroup.autoMount.enabled=false` and `cgroup.hostRoot=/sys/fs/cgroup` (the Talos defaults)",
    },
    Row {
        all: &["dial tcp 10.96.0.1:443", "i/o timeout"],
        cause: "the pod used the `kubernetes` Service IP, which routes nowhere before Cilium's service dataplane exists (kube-proxy is disabled on Talos)",
        fix: "point the client at an API endpoint outside the Service CIDR: `api_endpoint` (KubePrism `localhost:7445` on Talos, or a control-plane address), or for the flux bootstrap `job.env` KUBERNETES_SERVICE_HOST/PORT; for Cilium's agents `k8sServiceHost`/`k8sServicePort` (set by `talos_defaults`)",
    },
    Row {
        all: &[":7445: connect: connection refused"],
        cause: "nothing listens on the KubePrism port: KubePrism is disabled (Talos before 1.6, or `machine.features.kubePrism.enabled: false`) or runs on another port",
        fix: "enable KubePrism in the Talos machine config, or set `api_endpoint` to a control-plane address such as `<control-plane-ip>:6443`",
    },
    Row {
        all: &["i/o timeout"],
        cause: "the pod could not reach the API endpoint it was given",
        fix: "check `api_endpoint`: it must be reachable from the node's host network before any CNI runs (KubePrism `localhost:7445` on Talos)",
    },
    Row {
        all: &["network is not ready"],
        cause: "the pod needs the pod network, which does not exist before the CNI (Cilium) runs",
        fix: "run it with host networking, or make this resource `depends_on` the `talosboot_cilium` resource",
    },
    Row {
        all: &["cni plugin not initialized"],
        cause: "the pod needs the pod network, which does not exist before the CNI (Cilium) runs",
        fix: "run it with host networking, or make this resource `depends_on` the `talosboot_cilium` resource",
    },
    Row {
        all: &["untolerated taint {node.kubernetes.io/not-ready"],
        cause: "no node is Ready: nodes carry the not-ready taint until the CNI (Cilium) runs, so ordinary pods cannot be scheduled yet",
        fix: "install Cilium first: make this resource `depends_on` the `talosboot_cilium` resource",
    },
    Row {
        all: &["cannot re-use a name that is still in use"],
        cause: "a Helm release of this name exists (possibly stuck in `pending-install` after a killed run)",
        fix: "apply again (talosboot unlocks a stuck release before it installs), or import the existing release",
    },
    Row {
        all: &["another operation (install/upgrade/rollback) is in progress"],
        cause: "the release is locked by an operation that never finished (`pending-*`), or another Helm client is working on it right now",
        fix: "apply again once no other Helm client works on the release: talosboot unlocks stuck releases before upgrading",
    },
    Row {
        all: &["invalid ownership metadata"],
        cause: "objects of the chart exist without Helm's ownership labels (e.g. Cilium installed as Talos inline manifests)",
        fix: "set `adopt_existing = true` to take them under the release in place",
    },
    Row {
        all: &["exists and cannot be imported into the current release"],
        cause: "objects of the chart exist without Helm's ownership labels (e.g. Cilium installed as Talos inline manifests)",
        fix: "set `adopt_existing = true` to take them under the release in place",
    },
    Row {
        all: &["ImagePullBackOff"],
        cause: "the image cannot be pulled",
        fix: "check the image name and tag, or point `job.image` at a mirror the nodes can reach",
    },
    Row {
        all: &["ErrImagePull"],
        cause: "the image cannot be pulled",
        fix: "check the image name and tag, or point `job.image` at a mirror the nodes can reach",
    },
    Row {
        all: &["x509:"],
        cause: "TLS verification failed between the pod and the API endpoint",
        fix: "use an `api_endpoint` covered by the API server certificate (KubePrism `localhost:7445` is on Talos)",
    },
    Row {
        all: &["is forbidden: User"],
        cause: "the bootstrap ServiceAccount lacks a permission",
        fix: "the message names the verb and resource; keep `rbac = \"cluster-admin\"` or grant it",
    },
    Row {
        all: &["DeadlineExceeded"],
        cause: "the bootstrap did not finish within `timeout` (the installer hung or waited for something that never came)",
        fix: "the log tail above shows where it stopped; fix that, or raise `timeout`",
    },
];

/// The first known signature found in `texts`.
pub fn diagnose<'a>(texts: impl IntoIterator<Item = &'a str> + Clone) -> Option<Diagnosis> {
    TABLE.iter().find_map(|row| {
        texts.clone().into_iter().find_map(|text| {
            row.all.iter().all(|s| text.contains(s)).then(|| Diagnosis {
                signature: excerpt(text, row.all[0]),
                cause: row.cause,
                fix: row.fix,
            })
        })
    })
}

/// The line of `text` holding `needle`, at most 300 characters of it.
fn excerpt(text: &str, needle: &str) -> String {
    let line = text
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or(text)
        .trim();
    line.chars().take(300).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_ip_timeout_points_at_the_endpoint_override() {
        let log = "Error: Kubernetes cluster unreachable: Get \"https://10.96.0.1:443/version\": dial tcp 10.96.0.1:443: i/o timeout";
        let d = diagnose([log]).expect("known");
        assert!(d.fix.contains("api_endpoint"));
        assert!(d.signature.contains("10.96.0.1:443"));
    }

    #[test]
    fn kubeprism_refused_is_not_mistaken_for_a_timeout() {
        let d = diagnose(["dial tcp 127.0.0.1:7445: connect: connection refused"]).expect("known");
        assert!(d.cause.contains("KubePrism"));
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
        ];
        for (text, cause_word) in cases {
            let d = diagnose([text]).unwrap_or_else(|| panic!("{text} not recognised"));
            assert!(d.cause.contains(cause_word), "{text}: {}", d.cause);
        }
        assert_eq!(diagnose(["all good"]), None);
    }
}
