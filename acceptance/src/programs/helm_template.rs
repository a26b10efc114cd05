//! `helm template [NAME] [CHART]` (Helm 3.18): renders a chart locally, with install's values
//! handling (`-f/--values`, `--set`, `--set-string`) through [`Chart::render`], and prints the
//! manifest on stdout: for each object `---`, `# Source: <chart>/templates/<kind>.yaml`, then
//! the object as block YAML (top-level keys at column 0, keys sorted), as
//! [`manifests::manifest_text`] writes a release's manifest.
//!
//! Like real Helm without `--validate` it never contacts the API server (so it works with an
//! unbound ServiceAccount and with no reachable API), writes no release record and no object.
//! `--validate` dials the API first (unreachable → `Error: Kubernetes cluster unreachable: ...`)
//! and checks every rendered kind is served (`resource mapping not found ...`), with the pod's
//! permissions. One argument is the chart, the release then being `release-name`.
//!
//! Flags with behaviour: `--kube-version` (must parse as a version: else
//! `Error: invalid kube version 'x': Invalid Semantic Version`), `-s/--show-only` (a template
//! path such as `templates/daemonset.yaml`, `*` globs; none matching →
//! `Error: could not find template X in chart`), `--output-dir` (prints Helm's
//! `wrote DIR/<chart>/templates/<kind>.yaml` lines instead of the manifest; nothing is kept,
//! the simulated file system is read-only), `--release-name` (the release name in that path).
//! Accepted without effect, since the simulated charts do not branch on them:
//! `-a/--api-versions`, `--is-upgrade`, `--skip-tests` (no test hooks) and `--include-crds`:
//! no simulated chart has a `crds/` directory; the flux-operator chart's CRDs are templates,
//! printed with or without the flag, as with the real chart.

use std::collections::BTreeMap;

use serde_json::Value;

use super::charts::Chart;
use super::flags::Parsed;
use super::helm::{Args, load_values};
use super::{ProgramContext, manifests};
use crate::cluster::obj;

/// `template`'s own flags (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RenderOptions {
    pub kube_version: Option<String>,
    pub api_versions: Vec<String>,
    pub show_only: Vec<String>,
    pub output_dir: Option<String>,
    pub use_release_name: bool,
    pub include_crds: bool,
    pub is_upgrade: bool,
    pub skip_tests: bool,
    pub validate: bool,
}

impl RenderOptions {
    pub(super) fn from_parsed(p: &Parsed) -> RenderOptions {
        RenderOptions {
            kube_version: p.get("kube-version").map(String::from),
            api_versions: p.all("api-versions"),
            show_only: p.all("show-only"),
            output_dir: p.get("output-dir").map(String::from),
            use_release_name: p.on("release-name"),
            include_crds: p.on("include-crds"),
            is_upgrade: p.on("is-upgrade"),
            skip_tests: p.on("skip-tests"),
            validate: p.on("validate"),
        }
    }
}

/// The release name Helm uses when `template` gets only the chart.
const DEFAULT_RELEASE: &str = "release-name";

/// `helm template`; the error text is Helm's, without the `Error: ` prefix.
pub(super) async fn template(ctx: &ProgramContext, args: &Args, ns: &str) -> Result<(), String> {
    let opts = &args.render;
    // cobra checks the argument count before the command runs, Helm the rest after the version.
    let names = match &args.positional[1..] {
        [] => {
            return Err("\"helm template\" requires at least 1 argument\n\nUsage:  helm template [NAME] [CHART] [flags]".into());
        }
        [chart] => Ok((DEFAULT_RELEASE, chart)),
        [name, chart] => Ok((name.as_str(), chart)),
        [_, _, extra @ ..] => Err(format!(
            "expected at most two arguments, unexpected arguments: {}",
            extra.join(", ")
        )),
    };
    if let Some(v) = &opts.kube_version {
        if !is_semantic_version(v) {
            return Err(format!(
                "invalid kube version '{v}': Invalid Semantic Version"
            ));
        }
    }
    let (name, chart_ref) = names?;
    let vals = load_values(ctx, args)?;
    let chart = Chart::from_reference(chart_ref, args.version.as_deref());
    let objects = chart.render(name, ns, &vals);
    if opts.validate {
        validate(ctx, ns, &objects).await?;
    }
    let documents = documents(&chart.name, &objects);
    let shown = select(&documents, &opts.show_only)?;
    match &opts.output_dir {
        Some(dir) => {
            let base = if opts.use_release_name {
                format!("{}/{name}", dir.trim_end_matches('/'))
            } else {
                dir.trim_end_matches('/').to_string()
            };
            let mut written = std::collections::BTreeSet::new();
            for (path, _) in &shown {
                if written.insert(path.clone()) {
                    ctx.out(&format!("wrote {base}/{}/{path}", chart.name));
                }
            }
        }
        None => {
            for (_, text) in &shown {
                ctx.write_out(text.as_bytes());
            }
        }
    }
    Ok(())
}

/// The manifest split per object: (template path such as `templates/daemonset.yaml`, document).
fn documents(chart: &str, objects: &[Value]) -> Vec<(String, String)> {
    objects
        .iter()
        .map(|o| {
            let text = manifests::manifest_text(chart, std::slice::from_ref(o));
            let path = format!("templates/{}.yaml", obj::s(o, "/kind").to_lowercase());
            (path, text)
        })
        .collect()
}

/// The documents `--show-only` asks for (all without it), in the chart's order.
fn select(
    documents: &[(String, String)],
    show_only: &[String],
) -> Result<Vec<(String, String)>, String> {
    if show_only.is_empty() {
        return Ok(documents.to_vec());
    }
    let mut picked: BTreeMap<usize, (String, String)> = BTreeMap::new();
    for pattern in show_only {
        let matches: Vec<usize> = (0..documents.len())
            .filter(|i| glob(pattern, &documents[*i].0))
            .collect();
        if matches.is_empty() {
            return Err(format!("could not find template {pattern} in chart"));
        }
        for i in matches {
            picked.insert(i, documents[i].clone());
        }
    }
    Ok(picked.into_values().collect())
}

/// `filepath.Match` for the patterns used here: `*` (not across `/`) and `?`.
fn glob(pattern: &str, path: &str) -> bool {
    fn go(p: &[char], s: &[char]) -> bool {
        match (p.first(), s.first()) {
            (None, None) => true,
            (Some('*'), _) => {
                go(&p[1..], s) || (s.first().is_some_and(|c| *c != '/') && go(p, &s[1..]))
            }
            (Some('?'), Some(c)) if *c != '/' => go(&p[1..], &s[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &s[1..]),
            _ => false,
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let s: Vec<char> = path.chars().collect();
    go(&p, &s)
}

/// `--validate`: the API server must be reachable and serve every rendered kind.
async fn validate(ctx: &ProgramContext, ns: &str, objects: &[Value]) -> Result<(), String> {
    if let Err(e) = ctx.dial_api().await {
        return Err(format!(
            "Kubernetes cluster unreachable: Get \"{}/version\": {e}",
            ctx.endpoint().url()
        ));
    }
    for o in objects {
        let (api_version, kind) = (obj::s(o, "/apiVersion"), obj::s(o, "/kind"));
        if ctx.store.find_type(api_version, kind).is_none() {
            return Err(format!(
                "resource mapping not found for name: \"{}\" namespace: \"{ns}\" from \"\": no matches for kind \"{kind}\" in version \"{api_version}\"\nensure CRDs are installed first",
                obj::name(o)
            ));
        }
    }
    Ok(())
}

/// Whether `v` parses as Masterminds semver does it leniently (`v1.33.2`, `1.33`, `1`,
/// `1.33.0-rc.1+build`), as Helm's `chartutil.ParseKubeVersion`.
fn is_semantic_version(v: &str) -> bool {
    let core = v.strip_prefix('v').unwrap_or(v);
    let core = core.split(['+', '-']).next().unwrap_or("");
    let parts: Vec<&str> = core.split('.').collect();
    (1..=3).contains(&parts.len())
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_versions_parse_like_semver() {
        for ok in ["v1.33.2", "1.33", "1", "v1.34.0-rc.1", "1.33.2+k3s1"] {
            assert!(is_semantic_version(ok), "{ok}");
        }
        for bad in ["", "v", "1.x", "1.2.3.4", "latest", "1..2"] {
            assert!(!is_semantic_version(bad), "{bad}");
        }
    }

    #[test]
    fn show_only_globs_template_paths() {
        assert!(glob("templates/daemonset.yaml", "templates/daemonset.yaml"));
        assert!(glob("templates/*.yaml", "templates/configmap.yaml"));
        assert!(!glob("*.yaml", "templates/configmap.yaml"));
        let docs = vec![
            ("templates/configmap.yaml".to_string(), "a".to_string()),
            ("templates/daemonset.yaml".to_string(), "b".to_string()),
        ];
        let picked = select(&docs, &["templates/daemonset.yaml".into()]).unwrap();
        assert_eq!(picked, [docs[1].clone()]);
        assert_eq!(
            select(&docs, &["templates/nope.yaml".into()]).unwrap_err(),
            "could not find template templates/nope.yaml in chart"
        );
    }
}

#[cfg(test)]
mod run_tests {
    use super::super::{Program, helm::Helm};
    use super::*;
    use crate::store::{GroupResource, ListOptions};

    /// The render Job's helm arguments (without values files).
    const RENDER: &[&str] = &[
        "helm",
        "template",
        "cilium",
        "cilium",
        "--repo",
        "https://helm.cilium.io",
        "--version",
        "1.18.4",
        "--namespace",
        "kube-system",
        "--kube-version",
        "v1.33.2",
        "--api-versions",
        "apps/v1",
        "-a",
        "apps/v1/Deployment",
        "--include-crds",
        "--is-upgrade",
    ];

    async fn helm(argv: &[&str]) -> (i32, String, ProgramContext) {
        let ctx = ProgramContext::for_test("alpine/helm", argv);
        let exit = Helm.run(ctx.clone()).await;
        (exit.code, ctx.log_text(), ctx)
    }

    #[tokio::test]
    async fn renders_the_chart_without_the_api_and_writes_nothing() {
        // The test context has no node: the API is unreachable, as `--validate` shows.
        let (code, log, ctx) = helm(RENDER).await;
        assert_eq!(code, 0, "{log}");
        assert!(log.starts_with("---\n# Source: cilium/templates/"), "{log}");
        for line in ["apiVersion: apps/v1", "kind: DaemonSet", "kind: ConfigMap"] {
            assert!(log.lines().any(|l| l == line), "{line}: {log}");
        }
        assert_eq!(
            log.lines().filter(|l| *l == "---").count(),
            log.lines().filter(|l| l.starts_with("kind: ")).count()
        );
        let store = ctx.store.system();
        for resource in ["secrets", "configmaps", "serviceaccounts"] {
            let items = store
                .list(
                    &GroupResource::core(resource),
                    None,
                    &ListOptions::default(),
                )
                .unwrap()
                .items;
            assert!(items.is_empty(), "{resource}: {items:?}");
        }
        let mut validate = RENDER.to_vec();
        validate.push("--validate");
        let (code, log, _) = helm(&validate).await;
        assert_eq!(code, 1);
        assert!(
            log.starts_with("Error: Kubernetes cluster unreachable: "),
            "{log}"
        );
    }

    #[test]
    fn the_render_arguments_parse() {
        let argv: Vec<String> = RENDER[1..].iter().map(|s| s.to_string()).collect();
        let args = Args::parse(&argv).unwrap();
        assert_eq!(args.positional, ["template", "cilium", "cilium"]);
        assert_eq!(args.repo.as_deref(), Some("https://helm.cilium.io"));
        let render = &args.render;
        assert_eq!(render.kube_version.as_deref(), Some("v1.33.2"));
        assert_eq!(render.api_versions, ["apps/v1", "apps/v1/Deployment"]);
        assert!(render.include_crds && render.is_upgrade && !render.validate);
    }

    #[tokio::test]
    async fn template_flags_are_helm_3_18_s() {
        let (code, log, _) = helm(&[RENDER, &["--foo"]].concat()).await;
        assert_eq!((code, log.as_str()), (1, "Error: unknown flag: --foo\n"));
        // `--install` is upgrade's only.
        let (_, log, _) = helm(&[RENDER, &["--install"]].concat()).await;
        assert_eq!(log, "Error: unknown flag: --install\n");
        let (_, log, _) = helm(&["helm", "template", "c", "--kube-version", "latest"]).await;
        assert_eq!(
            log,
            "Error: invalid kube version 'latest': Invalid Semantic Version\n"
        );
        let (_, log, _) = helm(&["helm", "template"]).await;
        assert!(log.starts_with("Error: \"helm template\" requires at least 1 argument\n"));
        // One argument is the chart; the release is `release-name`.
        let (code, log, _) = helm(&[
            "helm",
            "template",
            "oci://example.com/charts/app",
            "-s",
            "templates/configmap.yaml",
        ])
        .await;
        assert_eq!(code, 0, "{log}");
        assert!(log.contains("name: release-name-rendered\n"), "{log}");
        let (code, log, _) = helm(&[
            "helm",
            "template",
            "cilium",
            "cilium",
            "--output-dir",
            "/tmp/out",
            "--release-name",
            "-s",
            "templates/d*",
        ])
        .await;
        assert_eq!(code, 0, "{log}");
        assert_eq!(
            log,
            "wrote /tmp/out/cilium/cilium/templates/daemonset.yaml\nwrote /tmp/out/cilium/cilium/templates/deployment.yaml\n"
        );
    }
}
