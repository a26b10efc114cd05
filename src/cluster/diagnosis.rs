//! The known failure signatures of a pre-CNI bootstrap, each with its cause and the fix in one
//! sentence. The table is matched against everything a failed run left behind: the container log
//! tail, container state messages and events. The first matching row wins, so more specific
//! signatures come first.
//!
//! Callers decide on the [`Signature`] (which failures end a wait at once, which one a log
//! signature may replace), never on the wording. The Service-IP timeout is judged for the cluster
//! it happened in: [`Diagnosis::judge_service_ip`] against the `kubernetes` Service's ClusterIP
//! read from it (any Service CIDR), and [`Diagnosis::explain_service_ip`] worded for whether
//! kube-proxy is deployed ([`crate::cluster::kube_proxy::explain`] reads both).

use crate::cluster::kube_proxy::KubeProxy;
use crate::cluster::talos;

/// The known failures, one per row of the table (some have several spellings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signature {
    PodSecurity,
    SysModule,
    CgroupMount,
    /// `dial tcp <ClusterIP>:443: i/o timeout`: the `kubernetes` Service IP did not route.
    ServiceIpTimeout,
    KubePrismRefused,
    EndpointTimeout,
    NoPodNetwork,
    NotReadyTaint,
    NameInUse,
    ReleaseLocked,
    Ownership,
    /// Helm 3 would have switched a release Helm 4 applies server-side to client-side apply.
    ApplyMethodSwitch,
    /// Server-side apply met fields another field manager owns.
    FieldConflict,
    ImagePull,
    Tls,
    RbacEscalation,
    Forbidden,
    Deadline,
    /// Nodes the node controller marked unreachable (their kubelet stopped reporting): may pass
    /// (a node rebooting), so it ends no wait, it only explains one that timed out.
    NodesUnreachable,
    /// A container that keeps crashing where crashing means it cannot run (Cilium's pre-flight
    /// check): judged by its restarts, not a text ([`Diagnosis::crash_loop`]).
    CrashLoop,
}

impl Signature {
    /// The configuration is wrong: waiting will not help.
    pub fn is_permanent(self) -> bool {
        matches!(
            self,
            Signature::SysModule
                | Signature::CrashLoop
                | Signature::CgroupMount
                | Signature::ServiceIpTimeout
                | Signature::KubePrismRefused
                | Signature::ImagePull
        )
    }

    /// No CNI yet: permanent unless a CNI is being installed right now.
    pub fn is_no_cni(self) -> bool {
        matches!(self, Signature::NoPodNetwork | Signature::NotReadyTaint)
    }
}

/// What a signature means and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnosis {
    pub kind: Signature,
    /// The text that was recognised, as it appeared.
    pub signature: String,
    pub cause: String,
    pub fix: String,
}

const SERVICE_IP_FIX: &str = "point the client at an API endpoint outside the Service CIDR: `api_endpoint` (KubePrism `localhost:7445` on Talos, or a control-plane address), or for the flux bootstrap `job.env` KUBERNETES_SERVICE_HOST/PORT; for Cilium's agents `k8sServiceHost`/`k8sServicePort` (set by `talos_defaults` with `kube_proxy_replacement = true`)";

/// The `kubernetes` Service's address in the default Service CIDR (`10.96.0.0/12`, Talos' and
/// kubeadm's). The table matches it before the cluster's own address is read, so that a wait can
/// end at once; [`Diagnosis::judge_service_ip`] then judges the timeout again with the address read
/// from the cluster.
pub const DEFAULT_SERVICE_IP: &str = "10.96.0.1";

/// How a client names a dial to `ip` in its error (`dial tcp 10.96.0.1:`, `dial tcp [fd00::1]:`).
fn dial_to(ip: &str) -> String {
    match ip.contains(':') {
        true => format!("dial tcp [{ip}]:"),
        false => format!("dial tcp {ip}:"),
    }
}

impl Diagnosis {
    /// `container` of `pod` crashed `restarts` times and is backing off (`CrashLoopBackOff`),
    /// where that alone means it cannot run; `shown` is how its state reads.
    pub fn crash_loop(
        namespace: &str,
        pod: &str,
        container: &str,
        restarts: i32,
        shown: &str,
    ) -> Diagnosis {
        Diagnosis {
            kind: Signature::CrashLoop,
            signature: shown.to_owned(),
            cause: format!(
                "container {container} of pod {pod} crashed {restarts} times and Kubernetes is backing off its restarts (CrashLoopBackOff)"
            ),
            fix: format!(
                "read why in its log (the last lines are above when the kubelet had any; all of them: `kubectl -n {namespace} logs {pod} -c {container} --previous`) and fix that, on the node (often its kernel) or in the image values (an image built for another architecture), before the upgrade"
            ),
        }
    }

    /// Judges an API timeout again with `cluster_ip`, the `kubernetes` Service's ClusterIP read
    /// from the cluster: a dial to it is the Service-IP timeout whatever the Service CIDR; a dial
    /// elsewhere (the default address on a cluster whose Service CIDR is another) is the
    /// endpoint's. Other diagnoses are left alone.
    pub fn judge_service_ip(&mut self, cluster_ip: &str) {
        if !matches!(
            self.kind,
            Signature::ServiceIpTimeout | Signature::EndpointTimeout
        ) {
            return;
        }
        let kind = match self.signature.contains(&dial_to(cluster_ip)) {
            true => Signature::ServiceIpTimeout,
            false => Signature::EndpointTimeout,
        };
        if kind != self.kind {
            match Diagnosis::known(kind, &self.signature) {
                Some(judged) => *self = judged,
                None => return,
            }
        }
        if kind == Signature::ServiceIpTimeout {
            self.cause = name_service_ip(&self.cause, cluster_ip);
        }
    }

    /// The address [`Self::judge_service_ip`] named in the cause, if it did.
    fn named_service_ip(&self) -> Option<&str> {
        let (_, rest) = self.cause.split_once(&format!("{SERVICE_IP} ("))?;
        rest.split_once(')').map(|(ip, _)| ip)
    }

    /// The configuration is wrong: waiting will not help, so a wait ends at once.
    pub fn is_permanent(&self) -> bool {
        self.kind.is_permanent()
    }

    /// No CNI yet (no pod network, nodes not Ready): permanent unless a CNI is being installed
    /// right now.
    pub fn waits_for_cni(&self) -> bool {
        self.kind.is_no_cni()
    }

    /// Words a Service-IP timeout for a cluster where kube-proxy is (or is not) deployed; other
    /// diagnoses are left alone.
    pub fn explain_service_ip(&mut self, kube_proxy: KubeProxy) {
        if self.kind != Signature::ServiceIpTimeout {
            return;
        }
        let named = self.named_service_ip().map(str::to_owned);
        match kube_proxy {
            KubeProxy::Absent => {
                self.cause = "the pod used the `kubernetes` Service IP, which routes nowhere before Cilium's service dataplane exists: kube-proxy is disabled in this cluster (no DaemonSet kube-system/kube-proxy), so only Cilium's kube-proxy replacement will route Services".into();
                self.fix = SERVICE_IP_FIX.into();
            }
            KubeProxy::Deployed => {
                self.cause = "the pod's connection to the `kubernetes` Service IP timed out although kube-proxy is deployed (DaemonSet kube-system/kube-proxy): kube-proxy is not routing Services on that node (its pod there is not running or not ready, or it cannot reach the API server itself), or the pod runs on the pod network, which does not exist before the CNI".into();
                self.fix = format!(
                    "check kube-proxy on that node (`kubectl -n kube-system get pods -l k8s-app=kube-proxy -o wide`, then its logs); or {SERVICE_IP_FIX}"
                );
            }
        }
        if let Some(ip) = named {
            self.cause = name_service_ip(&self.cause, &ip);
        }
    }
}

/// How the causes name the `kubernetes` Service's address.
const SERVICE_IP: &str = "the `kubernetes` Service IP";

/// `cause` with its first mention of the Service IP followed by `ip`: the user sees which address
/// of their cluster it is, whatever its Service CIDR.
fn name_service_ip(cause: &str, ip: &str) -> String {
    if cause.contains(&format!("{SERVICE_IP} (")) {
        return cause.to_owned();
    }
    cause.replacen(SERVICE_IP, &format!("{SERVICE_IP} ({ip})"), 1)
}

/// Builds cause and fix from the matched line.
type Detail = fn(&str) -> Option<(String, String)>;

struct Row {
    kind: Signature,
    /// All of these must appear (case-sensitive, as the tools print them).
    all: &'static [&'static str],
    cause: &'static str,
    fix: &'static str,
    /// Cause and fix built from the matched line (e.g. the verb and resource of a refusal);
    /// `None` from it falls back to `cause`/`fix`.
    detail: Option<Detail>,
}

const OWNERSHIP_CAUSE: &str = concat!(
    "objects of the chart exist without Helm's ownership labels (e.g. Cilium that Talos applied from its inline manifests: ",
    talos::inline_manifests!(),
    ")"
);
const OWNERSHIP_FIX: &str = "set `adopt_existing = true` to take them under the release in place (then see the migrating-cilium guide before removing an inline manifest: Talos 1.13+ prunes what its manifests no longer list)";

const TABLE: &[Row] = &[
    Row {
        kind: Signature::PodSecurity,
        all: &["violates PodSecurity"],
        cause: "the namespace's Pod Security level forbids the bootstrap pod (Talos enforces `baseline` everywhere but kube-system, and host networking needs `privileged`)",
        fix: "label the bootstrap namespace `pod-security.kubernetes.io/enforce=privileged`, or use a bootstrap namespace that talosboot creates (it labels it itself)",
        detail: None,
    },
    Row {
        kind: Signature::SysModule,
        all: &["unable to apply caps: operation not permitted"],
        cause: "a container requested the SYS_MODULE capability, which Talos forbids for every process",
        fix: "remove SYS_MODULE from `securityContext.capabilities.ciliumAgent` and `cleanCiliumState` (leave `talos_defaults = true` and do not override those lists)",
        detail: None,
    },
    Row {
        kind: Signature::CgroupMount,
        all: &["cilium-mount", "Permission denied"],
        cause: "Cilium tried to mount the cgroup2 filesystem itself, which Talos does not allow",
        fix: "set `cgroup.autoMount.enabled=false` and `cgroup.hostRoot=/sys/fs/cgroup` (the Talos defaults)",
        detail: None,
    },
    Row {
        // The default address (`DEFAULT_SERVICE_IP`); `judge_service_ip` covers the others.
        kind: Signature::ServiceIpTimeout,
        all: &["dial tcp 10.96.0.1:443", "i/o timeout"],
        cause: "the pod used the `kubernetes` Service IP, which routes nowhere until a Service dataplane runs on the node: kube-proxy, or Cilium's kube-proxy replacement once its agent is up",
        fix: SERVICE_IP_FIX,
        detail: None,
    },
    Row {
        kind: Signature::KubePrismRefused,
        all: &[":7445: connect: connection refused"],
        cause: concat!(
            "nothing listens on the KubePrism port: KubePrism is disabled (Talos before 1.6, or ",
            talos::kubeprism_disabled!(),
            ") or runs on another port"
        ),
        fix: concat!(
            "enable KubePrism in the Talos machine config (",
            talos::kubeprism_enabled!(),
            "), or set `api_endpoint` to a control-plane address such as `<control-plane-ip>:6443`"
        ),
        detail: None,
    },
    Row {
        kind: Signature::EndpointTimeout,
        all: &["i/o timeout"],
        cause: "the pod could not reach the API endpoint it was given",
        fix: "check `api_endpoint`: it must be reachable from the node's host network before any CNI runs (KubePrism `localhost:7445` on Talos)",
        detail: None,
    },
    Row {
        kind: Signature::NoPodNetwork,
        all: &["network is not ready"],
        cause: "the pod needs the pod network, which does not exist before the CNI (Cilium) runs",
        fix: "run it with host networking, or make this resource `depends_on` the `talosboot_cilium` resource",
        detail: None,
    },
    Row {
        kind: Signature::NoPodNetwork,
        all: &["cni plugin not initialized"],
        cause: "the pod needs the pod network, which does not exist before the CNI (Cilium) runs",
        fix: "run it with host networking, or make this resource `depends_on` the `talosboot_cilium` resource",
        detail: None,
    },
    Row {
        kind: Signature::NotReadyTaint,
        all: &["untolerated taint {node.kubernetes.io/not-ready"],
        cause: "no node is Ready: nodes carry the not-ready taint until the CNI (Cilium) runs, so ordinary pods cannot be scheduled yet",
        fix: "install Cilium first: make this resource `depends_on` the `talosboot_cilium` resource",
        detail: None,
    },
    Row {
        // After the not-ready row: a cluster without a CNI and a node down names both taints.
        kind: Signature::NodesUnreachable,
        all: &["untolerated taint", "node.kubernetes.io/unreachable"],
        cause: "nodes are unreachable: the node controller taints a node `node.kubernetes.io/unreachable` once its kubelet stops reporting, and no pod is scheduled there",
        fix: "check those nodes (`kubectl get nodes`, then the machines: powered off, network cut, kubelet stopped, or rebooting); apply again once they report Ready",
        detail: None,
    },
    Row {
        // The real scheduler's wording when the nodes' taints differ (a control plane has its
        // role taint too): the taints are not named.
        kind: Signature::NotReadyTaint,
        all: &["FailedScheduling", "had untolerated taint(s)"],
        cause: "no node is Ready (or none whose taints the pod tolerates): before the CNI (Cilium) runs, every node carries the `node.kubernetes.io/not-ready` taint, so ordinary pods cannot be scheduled yet",
        fix: "install Cilium first: make this resource `depends_on` the `talosboot_cilium` resource; if the nodes are Ready, check the pod's tolerations (`kubectl describe nodes | grep Taints`)",
        detail: None,
    },
    Row {
        kind: Signature::NameInUse,
        all: &["cannot re-use a name that is still in use"],
        cause: "a Helm release of this name exists (possibly stuck in `pending-install` after a killed run)",
        fix: "apply again (talosboot unlocks a stuck release before it installs), or import the existing release",
        detail: None,
    },
    Row {
        kind: Signature::ReleaseLocked,
        all: &["another operation (install/upgrade/rollback) is in progress"],
        cause: "the release is locked by an operation that never finished (`pending-*`), or another Helm client is working on it right now",
        fix: "apply again once no other Helm client works on the release: talosboot unlocks stuck releases before upgrading",
        detail: None,
    },
    Row {
        kind: Signature::Ownership,
        all: &["invalid ownership metadata"],
        cause: OWNERSHIP_CAUSE,
        fix: OWNERSHIP_FIX,
        detail: None,
    },
    Row {
        kind: Signature::Ownership,
        all: &["exists and cannot be imported into the current release"],
        cause: OWNERSHIP_CAUSE,
        fix: OWNERSHIP_FIX,
        detail: None,
    },
    Row {
        kind: Signature::ApplyMethodSwitch,
        all: &["talosboot refused the install:", "apply_method: ssa"],
        cause: "the installer image carries Helm 3, which applies client-side only, and the release's newest record says Helm 4 applied it server-side (`apply_method: ssa`): Helm 3 would switch the release to client-side apply for good (and drop `apply_method` from the record it supersedes)",
        // The default image is named by `job.image.repository`'s description, not here.
        fix: "use a Helm 4 installer image (talosboot's default, or a mirror of it), or set `job.apply_method = \"csa\"` to switch the release to client-side apply deliberately",
        detail: None,
    },
    Row {
        kind: Signature::ApplyMethodSwitch,
        all: &["talosboot refused the install:", "no server-side apply"],
        cause: "`job.apply_method` is \"ssa\", but the installer image carries Helm 3, which has no server-side apply",
        fix: "use a Helm 4 installer image (talosboot's default), or remove `job.apply_method`",
        detail: None,
    },
    Row {
        kind: Signature::FieldConflict,
        all: &["Apply failed with", "conflict"],
        cause: "Helm 4 applies this release server-side, and fields it sets are owned by another field manager (the message names it: `talos` for Talos' inline manifests, `kubectl-client-side-apply` or `kubectl-edit` for kubectl, `helm` with operation Update for Helm 3's client-side writes) with other values",
        fix: "to take objects installed outside the release, set `adopt_existing = true` (talosboot then adds `--force-conflicts` and the plan names whose fields are taken); for fields someone changed by hand, undo the change or set `job.apply_method = \"csa\"` to apply client-side (Helm 3's three-way merge, which overwrites them)",
        detail: None,
    },
    Row {
        kind: Signature::ImagePull,
        all: &["ImagePullBackOff"],
        cause: "the image cannot be pulled",
        fix: IMAGE_PULL_FIX,
        detail: Some(image_pull_detail),
    },
    Row {
        kind: Signature::ImagePull,
        all: &["ErrImagePull"],
        cause: "the image cannot be pulled",
        fix: IMAGE_PULL_FIX,
        detail: Some(image_pull_detail),
    },
    Row {
        kind: Signature::Tls,
        all: &["x509:"],
        cause: "TLS verification failed between the pod and the API endpoint",
        fix: "use an `api_endpoint` covered by the API server certificate (KubePrism `localhost:7445` is on Talos)",
        detail: None,
    },
    Row {
        kind: Signature::RbacEscalation,
        all: &["is attempting to grant RBAC permissions not currently held"],
        cause: "the bootstrap ServiceAccount may not create a role or binding that grants permissions it does not hold itself (the API server's escalation prevention)",
        fix: "charts that ship RBAC need `escalate` and `bind` on `clusterroles` and `roles` (group rbac.authorization.k8s.io); `rbac = \"minimal\"` grants them when the rendered chart holds a role or binding, so this one creates RBAC objects its render did not show: use `rbac = \"cluster-admin\"` for it",
        detail: None,
    },
    Row {
        kind: Signature::Forbidden,
        all: &["is forbidden: User"],
        cause: "the bootstrap ServiceAccount lacks a permission",
        fix: "the message names the verb and resource; with `rbac = \"minimal\"` the chart needs it beyond the kinds it renders (a template `lookup`?): use `rbac = \"cluster-admin\"` for it",
        detail: Some(forbidden_detail),
    },
    Row {
        kind: Signature::Deadline,
        all: &["DeadlineExceeded"],
        cause: "the bootstrap did not finish within `timeout` (the installer hung or waited for something that never came)",
        fix: "the log tail above shows where it stopped; fix that, or raise `timeout`",
        detail: None,
    },
];

/// The first known signature found in `texts`.
pub fn diagnose<'a>(texts: impl IntoIterator<Item = &'a str> + Clone) -> Option<Diagnosis> {
    TABLE.iter().find_map(|row| {
        texts.clone().into_iter().find_map(|text| {
            row.all.iter().all(|s| text.contains(s)).then(|| {
                let signature = excerpt(text, row.all[0]);
                let (cause, fix) = row
                    .detail
                    .and_then(|f| f(line_of(text, row.all[0])))
                    .unwrap_or_else(|| (row.cause.to_owned(), row.fix.to_owned()));
                Diagnosis {
                    kind: row.kind,
                    signature,
                    cause,
                    fix,
                }
            })
        })
    })
}

impl Diagnosis {
    /// The diagnosis of a failure its caller recognised itself (no text to match): the first row
    /// of `kind`, `text` (its first line, at most 300 characters) as what was recognised.
    pub fn known(kind: Signature, text: &str) -> Option<Diagnosis> {
        let row = TABLE.iter().find(|row| row.kind == kind)?;
        let line = text.lines().next().unwrap_or_default().trim();
        let (cause, fix) = row
            .detail
            .and_then(|f| f(line))
            .unwrap_or_else(|| (row.cause.to_owned(), row.fix.to_owned()));
        Some(Diagnosis {
            kind,
            signature: line.chars().take(300).collect(),
            cause,
            fix,
        })
    }
}

/// The parts of the API server's refusal `User "U" cannot VERB resource "R" in API group "G"
/// in the namespace "NS"` (or `at the cluster scope`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forbidden {
    pub user: String,
    pub verb: String,
    pub resource: String,
    pub group: String,
    /// `None`: at the cluster scope.
    pub namespace: Option<String>,
}

/// Parses a refusal out of `text` (see [`Forbidden`]).
pub fn parse_forbidden(text: &str) -> Option<Forbidden> {
    let quoted = |s: &str| -> Option<(String, usize)> {
        let s_trim = s.strip_prefix('"')?;
        let end = s_trim.find('"')?;
        Some((s_trim[..end].to_owned(), end + 2))
    };
    let at = text.find("is forbidden: User ")? + "is forbidden: User ".len();
    let rest = &text[at..];
    let (user, used) = quoted(rest)?;
    let rest = rest[used..].strip_prefix(" cannot ")?;
    let (verb, rest) = rest.split_once(' ')?;
    let rest = rest.strip_prefix("resource ")?;
    let (resource, used) = quoted(rest)?;
    let rest = rest[used..].strip_prefix(" in API group ")?;
    let (group, used) = quoted(rest)?;
    let rest = &rest[used..];
    let namespace = match rest.strip_prefix(" in the namespace ") {
        Some(ns) => Some(quoted(ns)?.0),
        None => None,
    };
    Some(Forbidden {
        user,
        verb: verb.to_owned(),
        resource,
        group,
        namespace,
    })
}

/// An image pull failure whose image is not named: either image may be the one.
const IMAGE_PULL_FIX: &str = "check the image name and tag: the installer Job's image is `job.image`, the chart's workloads' images are the chart's values (`image.repository` and `image.tag` in most charts); or point them at a mirror the nodes can reach";

/// The image the kubelet names (`... image "quay.io/cilium/cilium:v1.20.2" ...`) decides which
/// setting the fix names: the installer Job's `job.image` only for the installer's own image (a
/// Helm image), the chart's values for everything the chart runs (Cilium's agents, the
/// pre-flight DaemonSet, the operator).
fn image_pull_detail(line: &str) -> Option<(String, String)> {
    let image = line.split("image \"").nth(1)?.split('"').next()?;
    let installer =
        image.contains("/helm:") || image.contains("/helm@") || image.starts_with("helm:");
    let fix = match installer {
        true => format!(
            "check the installer image `{image}`, or point `job.image` at a mirror of it the nodes can reach"
        ),
        false => format!(
            "`{image}` is an image the chart runs: check the chart's image values (`image.repository` and `image.tag` in most charts; for Cilium also `image.override`, `operator.image.*` and `preflight.image.*`), or point them at a mirror the nodes can reach"
        ),
    };
    Some(("the image cannot be pulled".to_owned(), fix))
}

fn forbidden_detail(line: &str) -> Option<(String, String)> {
    let f = parse_forbidden(line)?;
    let scope = match &f.namespace {
        Some(ns) => format!("in namespace {ns}"),
        None => "at the cluster scope".to_owned(),
    };
    let cause = format!(
        "the bootstrap ServiceAccount ({}) lacks a permission: it may not `{}` resource `{}` in API group \"{}\" {scope}",
        f.user, f.verb, f.resource, f.group
    );
    let fix = format!(
        "with `rbac = \"minimal\"` the run is granted the kinds the chart renders; verb `{}` on resource `{}` (apiGroups [\"{}\"]) is beyond them (a template `lookup`, or an object made outside the chart): use `rbac = \"cluster-admin\"` for this release. With `cluster-admin`, another authorizer or a removed binding denied it",
        f.verb, f.resource, f.group
    );
    Some((cause, fix))
}

/// The line of `text` holding `needle`.
fn line_of<'a>(text: &'a str, needle: &str) -> &'a str {
    text.lines()
        .find(|l| l.contains(needle))
        .unwrap_or(text)
        .trim()
}

/// The line of `text` holding `needle`, at most 300 characters of it.
fn excerpt(text: &str, needle: &str) -> String {
    line_of(text, needle).chars().take(300).collect()
}

#[cfg(test)]
mod tests;
