//! Faults of the kubelets set at run time ([`super::TalosCluster::set_image_pull_failure`],
//! [`super::TalosCluster::set_crash_loop`], `talos-sim serve --image-pull-failure` and
//! `--crash-loop`, or the ConfigMap `kube-system/talos-sim-kubelet-faults`): an image that
//! cannot be pulled on some nodes (a registry mirror without it, an air-gapped node), or a
//! program that starts and exits 1 (a bad release, an agent that cannot start on that kernel).
//! The kubelet reacts as the real one does (`kubelet.rs`): `ErrImagePull`/`ImagePullBackOff` or
//! `CrashLoopBackOff`, its events, and its back-off retries, which succeed once the fault is
//! cleared.
//!
//! An image is chosen by a pattern over its full reference: `*` matches any run of
//! characters, anything else itself (`quay.io/cilium/cilium:v1.20.2`, `*:v1.20.2`,
//! `quay.io/cilium/*`).

use std::collections::BTreeMap;
use std::sync::Mutex;

/// What a fault does to a container whose image matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum FaultKind {
    /// The pull fails (`ErrImagePull`, then `ImagePullBackOff`), for every container of the image.
    ImagePull,
    /// The program starts and exits 1 at once, so the restart policy and `CrashLoopBackOff`
    /// follow. Only a pod's containers: its init containers (other commands of the image) run.
    CrashLoop,
}

impl FaultKind {
    /// The key of the ConfigMap `kube-system/talos-sim-kubelet-faults` and the `serve` flag's
    /// name.
    pub fn key(self) -> &'static str {
        match self {
            FaultKind::ImagePull => "image-pull-failure",
            FaultKind::CrashLoop => "crash-loop",
        }
    }
}

/// The nodes a fault applies to.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Nodes {
    All,
    Some(Vec<String>),
}

/// Where a rule was set: the ConfigMap's rules are replaced whole when it changes, so that
/// removing a line clears it, without touching the rules set in the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    Process,
    ConfigMap,
}

/// The faults in force, keyed by (source, kind, pattern).
#[derive(Debug, Default)]
pub struct KubeletFaults {
    rules: Mutex<BTreeMap<(Source, FaultKind, String), Nodes>>,
}

impl KubeletFaults {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(Source, FaultKind, String), Nodes>> {
        self.rules.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes `kind` apply to images matching `pattern` on `nodes` (`None`: every node), in
    /// addition to the nodes it already applies to.
    pub fn set(&self, source: Source, kind: FaultKind, pattern: &str, nodes: Option<Vec<String>>) {
        let mut rules = self.lock();
        let key = (source, kind, pattern.to_owned());
        let merged = match (rules.remove(&key), nodes) {
            (_, None) | (Some(Nodes::All), _) => Nodes::All,
            (Some(Nodes::Some(mut old)), Some(new)) => {
                for node in new {
                    if !old.contains(&node) {
                        old.push(node);
                    }
                }
                Nodes::Some(old)
            }
            (None, Some(new)) => Nodes::Some(new),
        };
        rules.insert(key, merged);
    }

    /// Lifts `kind` for `pattern` on `nodes` (`None`: everywhere); `all_nodes` names the
    /// cluster's nodes, for a fault on every node lifted on some.
    pub fn clear(
        &self,
        source: Source,
        kind: FaultKind,
        pattern: &str,
        nodes: Option<Vec<String>>,
        all_nodes: &[String],
    ) {
        let mut rules = self.lock();
        let key = (source, kind, pattern.to_owned());
        let Some(clear) = nodes else {
            rules.remove(&key);
            return;
        };
        let left: Vec<String> = match rules.remove(&key) {
            None => return,
            Some(Nodes::All) => all_nodes.to_vec(),
            Some(Nodes::Some(old)) => old,
        }
        .into_iter()
        .filter(|n| !clear.contains(n))
        .collect();
        if !left.is_empty() {
            rules.insert(key, Nodes::Some(left));
        }
    }

    /// Replaces every rule of `source` (the ConfigMap's, read again).
    pub fn replace(&self, source: Source, rules: Vec<(FaultKind, String, Option<Vec<String>>)>) {
        self.lock().retain(|(s, _, _), _| *s != source);
        for (kind, pattern, nodes) in rules {
            self.set(source, kind, &pattern, nodes);
        }
    }

    /// Whether `kind` applies to `image` on `node`.
    pub fn matches(&self, kind: FaultKind, image: &str, node: &str) -> bool {
        self.lock().iter().any(|((_, k, pattern), nodes)| {
            *k == kind
                && glob(pattern, image)
                && match nodes {
                    Nodes::All => true,
                    Nodes::Some(list) => list.iter().any(|n| n == node),
                }
        })
    }
}

/// `*` matches any run of characters (also none); every other character itself.
pub fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// One line of the ConfigMap or a `serve` flag's value: `PATTERN` (every node) or
/// `PATTERN@NODE,NODE`.
pub fn parse_rule(line: &str) -> Option<(String, Option<Vec<String>>)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    Some(match line.rsplit_once('@') {
        Some((pattern, nodes)) => (
            pattern.trim().to_owned(),
            Some(
                nodes
                    .split(',')
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .map(String::from)
                    .collect(),
            ),
        ),
        None => (line.to_owned(), None),
    })
}

/// The rules of the ConfigMap's data: one key per [`FaultKind`], one rule a line.
pub fn rules_of(data: &BTreeMap<String, String>) -> Vec<(FaultKind, String, Option<Vec<String>>)> {
    [FaultKind::ImagePull, FaultKind::CrashLoop]
        .into_iter()
        .flat_map(|kind| {
            data.get(kind.key())
                .map(|text| text.lines().filter_map(parse_rule).collect::<Vec<_>>())
                .unwrap_or_default()
                .into_iter()
                .map(move |(pattern, nodes)| (kind, pattern, nodes))
        })
        .collect()
}

/// The ConfigMap a running `talos-sim serve` (or any cluster) reads faults from.
pub const CONFIGMAP: &str = "talos-sim-kubelet-faults";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_whole_references() {
        let image = "quay.io/cilium/cilium:v1.20.2";
        for (pattern, expected) in [
            ("quay.io/cilium/cilium:v1.20.2", true),
            ("quay.io/cilium/cilium:v1.20", false),
            ("*:v1.20.2", true),
            ("quay.io/cilium/*", true),
            ("quay.io/*/cilium:*", true),
            ("*operator*", false),
            ("*", true),
            ("quay.io/cilium/cilium:v1.20.2*", true),
            ("*cilium:v1.19.7", false),
        ] {
            assert_eq!(glob(pattern, image), expected, "{pattern}");
        }
        assert!(!glob("a*a", "a"), "the parts do not overlap");
    }

    #[test]
    fn faults_apply_to_their_nodes_and_clear_by_node() {
        let faults = KubeletFaults::default();
        let nodes = ["a".to_owned(), "b".to_owned(), "c".to_owned()];
        let image = "quay.io/cilium/cilium:v1.20.2";
        faults.set(
            Source::Process,
            FaultKind::ImagePull,
            "*:v1.20.2",
            Some(vec!["a".into()]),
        );
        assert!(faults.matches(FaultKind::ImagePull, image, "a"));
        assert!(!faults.matches(FaultKind::ImagePull, image, "b"));
        assert!(
            !faults.matches(FaultKind::CrashLoop, image, "a"),
            "another kind"
        );
        faults.set(
            Source::Process,
            FaultKind::ImagePull,
            "*:v1.20.2",
            Some(vec!["b".into()]),
        );
        assert!(
            faults.matches(FaultKind::ImagePull, image, "b"),
            "nodes add up"
        );
        faults.clear(
            Source::Process,
            FaultKind::ImagePull,
            "*:v1.20.2",
            Some(vec!["a".into()]),
            &nodes,
        );
        assert!(!faults.matches(FaultKind::ImagePull, image, "a"));
        assert!(faults.matches(FaultKind::ImagePull, image, "b"));
        faults.set(Source::Process, FaultKind::CrashLoop, "quay.io/*", None);
        faults.clear(
            Source::Process,
            FaultKind::CrashLoop,
            "quay.io/*",
            Some(vec!["c".into()]),
            &nodes,
        );
        assert!(faults.matches(FaultKind::CrashLoop, image, "a"));
        assert!(
            !faults.matches(FaultKind::CrashLoop, image, "c"),
            "every node but c"
        );
        faults.clear(
            Source::Process,
            FaultKind::CrashLoop,
            "quay.io/*",
            None,
            &nodes,
        );
        assert!(!faults.matches(FaultKind::CrashLoop, image, "a"));
    }

    #[test]
    fn the_configmap_replaces_only_its_own_rules() {
        let faults = KubeletFaults::default();
        faults.set(Source::Process, FaultKind::CrashLoop, "x:*", None);
        let data = BTreeMap::from([(
            "image-pull-failure".to_owned(),
            "# comment\nquay.io/cilium/cilium:v1.20.2@talos-worker-1, talos-worker-2\n\n*:bad\n"
                .to_owned(),
        )]);
        let rules = rules_of(&data);
        assert_eq!(
            rules,
            vec![
                (
                    FaultKind::ImagePull,
                    "quay.io/cilium/cilium:v1.20.2".to_owned(),
                    Some(vec![
                        "talos-worker-1".to_owned(),
                        "talos-worker-2".to_owned()
                    ])
                ),
                (FaultKind::ImagePull, "*:bad".to_owned(), None),
            ]
        );
        faults.replace(Source::ConfigMap, rules);
        assert!(faults.matches(FaultKind::ImagePull, "a:bad", "any"));
        faults.replace(Source::ConfigMap, Vec::new());
        assert!(!faults.matches(FaultKind::ImagePull, "a:bad", "any"));
        assert!(
            faults.matches(FaultKind::CrashLoop, "x:1", "any"),
            "the process's rule stays"
        );
    }
}
