//! What the chart server publishes: `repositories.yaml` read, every chart packaged at every
//! version by the real `helm package`, and from the packages the classic repositories'
//! `index.yaml` files and the OCI registries' manifests, configs and blobs.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use bytes::Bytes;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The OCI image manifest media type.
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// Helm's chart config media type (the chart's metadata as JSON).
pub const HELM_CONFIG: &str = "application/vnd.cncf.helm.config.v1+json";
/// Helm's chart content layer media type (the `.tgz`).
pub const HELM_CHART_LAYER: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";

/// The time every package and index entry says it was created (the index needs one; a fixed
/// one keeps the indexes identical between runs apart from the packages' digests).
const CREATED: &str = "2025-11-20T12:00:00Z";

/// `repositories.yaml`.
#[derive(Debug, Deserialize)]
struct RepositoriesFile {
    repositories: Vec<RepositorySpec>,
}

#[derive(Debug, Deserialize)]
struct RepositorySpec {
    url: String,
    charts: Vec<ChartSpec>,
}

#[derive(Debug, Deserialize)]
struct ChartSpec {
    name: String,
    #[serde(default)]
    source: Option<String>,
    /// version -> appVersion.
    versions: BTreeMap<String, String>,
    #[serde(default)]
    generated_crds: Option<GeneratedCrds>,
}

/// The CRDs generated from a project's API types (`.tools/flux/crds/*.yaml`, by
/// `scripts/install-tools.sh`), put into the packages of the listed versions as
/// `crds-generated/<name>.yaml`, which the chart's CRD template renders instead of its own.
#[derive(Debug, Deserialize)]
struct GeneratedCrds {
    /// The API group of the CRDs to take (`fluxcd.controlplane.io`).
    group: String,
    /// Under the tools folder (`flux/crds`).
    from: String,
    versions: Vec<String>,
}

/// Where a repository lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RepositoryKind {
    /// A classic chart repository: `index.yaml` under `path` (`""` or `/argo-helm`).
    Http { path: String },
    /// An OCI registry namespace: chart `c` is the repository `<namespace>/c`.
    Oci { namespace: String },
}

/// One chart version the server publishes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublishedChart {
    /// The repository URL as users write it: `https://helm.cilium.io`,
    /// `oci://ghcr.io/controlplaneio-fluxcd/charts`.
    pub repository: String,
    /// The hostname serving it.
    pub host: String,
    pub kind: RepositoryKind,
    pub name: String,
    pub version: String,
    pub app_version: String,
    /// The `.tgz` written by `helm package`.
    pub package: PathBuf,
    /// Hex SHA-256 of the package (the index's `digest`, the OCI layer's digest without `sha256:`).
    pub sha256: String,
    /// What users pass to Helm: `https://helm.cilium.io/cilium-1.18.4.tgz` (the index's URL), or
    /// `oci://ghcr.io/controlplaneio-fluxcd/charts/flux-operator:0.33.0`.
    pub url: String,
}

/// A response body with its content type.
#[derive(Clone, Debug)]
pub struct Content {
    pub media_type: String,
    pub body: Bytes,
}

impl Content {
    pub fn digest(&self) -> String {
        format!("sha256:{}", sha256_hex(&self.body))
    }
}

/// One OCI repository (`controlplaneio-fluxcd/charts/flux-operator`).
#[derive(Debug, Default)]
pub struct OciRepository {
    /// Tag -> manifest digest, in publication order.
    pub tags: Vec<(String, String)>,
    /// Digest -> manifest.
    pub manifests: HashMap<String, Content>,
    /// Digest -> config or layer blob.
    pub blobs: HashMap<String, Content>,
}

/// Everything served, by host.
#[derive(Debug, Default)]
pub struct Catalog {
    /// (host, path) -> file (`index.yaml`, packages).
    pub files: HashMap<(String, String), Content>,
    /// host -> OCI repository name -> repository.
    pub oci: HashMap<String, BTreeMap<String, OciRepository>>,
    pub published: Vec<PublishedChart>,
}

impl Catalog {
    pub fn hostnames(&self) -> Vec<String> {
        self.published
            .iter()
            .map(|p| p.host.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    }
}

/// Splits a repository URL into (host, kind).
fn parse_url(url: &str) -> anyhow::Result<(String, RepositoryKind)> {
    let (scheme, rest) = url
        .split_once("://")
        .with_context(|| format!("repository URL {url:?} has no scheme"))?;
    let rest = rest.trim_end_matches('/');
    let (host, path) = match rest.split_once('/') {
        Some((h, p)) => (h, format!("/{p}")),
        None => (rest, String::new()),
    };
    if host.is_empty() || host.contains(':') {
        bail!("repository URL {url:?}: want a host name without port");
    }
    let kind = match scheme {
        "https" => RepositoryKind::Http { path },
        "oci" if !path.is_empty() => RepositoryKind::Oci {
            namespace: path.trim_start_matches('/').to_string(),
        },
        _ => bail!("repository URL {url:?}: want https://host[/path] or oci://host/path"),
    };
    Ok((host.to_ascii_lowercase(), kind))
}

fn read_repositories(charts_dir: &Path) -> anyhow::Result<Vec<RepositorySpec>> {
    let path = charts_dir.join("repositories.yaml");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let file: RepositoriesFile =
        serde_saphyr::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    Ok(file.repositories)
}

/// The hostnames `repositories.yaml` publishes on, sorted (for the certificate and the pods'
/// `/etc/hosts`, before any server runs).
pub fn served_hostnames(charts_dir: &Path) -> anyhow::Result<Vec<String>> {
    let mut hosts = BTreeSet::new();
    for repo in read_repositories(charts_dir)? {
        hosts.insert(parse_url(&repo.url)?.0);
    }
    Ok(hosts.into_iter().collect())
}

/// One `helm package` to run.
struct PackageJob {
    repository: String,
    host: String,
    kind: RepositoryKind,
    name: String,
    version: String,
    app_version: String,
    source: PathBuf,
    out_dir: PathBuf,
}

/// Packages every chart version and builds what is served.
pub async fn build(charts_dir: &Path, helm: &Path, work_dir: &Path) -> anyhow::Result<Catalog> {
    if !helm.is_file() {
        bail!(
            "the Helm binary {} is missing: run scripts/install-tools.sh (or set TALOSBOOT_HELM)",
            helm.display()
        );
    }
    let repositories = read_repositories(charts_dir)?;
    let sources_dir = work_dir.join("sources");
    let packages_dir = work_dir.join("packages");
    let helm_home = work_dir.join("helm-home");
    std::fs::create_dir_all(&helm_home)?;
    let mut jobs = Vec::new();
    let mut renamed: HashMap<(String, String), PathBuf> = HashMap::new();
    for repo in &repositories {
        let (host, kind) = parse_url(&repo.url)?;
        let url = repo.url.trim_end_matches('/').to_string();
        for chart in &repo.charts {
            let source_name = chart.source.as_deref().unwrap_or(&chart.name);
            let original = charts_dir.join(source_name);
            if !original.join("Chart.yaml").is_file() {
                bail!(
                    "chart {} of {url}: no chart directory {}",
                    chart.name,
                    original.display()
                );
            }
            let source = if source_name == chart.name {
                original
            } else {
                let key = (chart.name.clone(), source_name.to_string());
                match renamed.get(&key) {
                    Some(p) => p.clone(),
                    None => {
                        let dest = sources_dir.join(&chart.name);
                        copy_renamed(&original, &dest, &chart.name)?;
                        renamed.insert(key, dest.clone());
                        dest
                    }
                }
            };
            let sub = match &kind {
                RepositoryKind::Http { path } => path.trim_start_matches('/').to_string(),
                RepositoryKind::Oci { namespace } => namespace.clone(),
            };
            for (version, app_version) in &chart.versions {
                let source = match &chart.generated_crds {
                    Some(g) if g.versions.contains(version) => {
                        let dest = sources_dir.join(format!("{}-{version}", chart.name));
                        copy_dir(&source, &dest)?;
                        add_generated_crds(&dest, g)?;
                        dest
                    }
                    _ => source.clone(),
                };
                jobs.push(PackageJob {
                    repository: url.clone(),
                    host: host.clone(),
                    kind: kind.clone(),
                    name: chart.name.clone(),
                    version: version.clone(),
                    app_version: app_version.clone(),
                    source: source.clone(),
                    out_dir: packages_dir.join(&host).join(&sub),
                });
            }
        }
    }
    // Two at a time: `helm package` is quick, and the machine may be small.
    let results: Vec<anyhow::Result<PublishedChart>> = futures::stream::iter(jobs)
        .map(|job| package(helm, &helm_home, job))
        .buffered(2)
        .collect()
        .await;
    let mut catalog = Catalog::default();
    for r in results {
        catalog.published.push(r?);
    }
    publish_http(&mut catalog)?;
    publish_oci(&mut catalog)?;
    Ok(catalog)
}

/// Writes the generated CRDs of `g.group` into `chart/crds-generated/`; none found (the tools
/// not built): a warning, and the chart renders its schema-less CRDs.
fn add_generated_crds(chart: &Path, g: &GeneratedCrds) -> anyhow::Result<()> {
    let from = crate::talos::tools::root().join(&g.from);
    let crds = crate::talos::flux_distribution::read_crds(&from);
    let dir = chart.join("crds-generated");
    let mut written = 0;
    for (name, crd) in crds {
        if crd["spec"]["group"] != g.group.as_str() {
            continue;
        }
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(format!("{name}.yaml")), to_yaml(&crd))?;
        written += 1;
    }
    if written == 0 {
        tracing::warn!(dir = %from.display(), group = %g.group, "no generated CRDs: the chart keeps its schema-less ones");
    }
    Ok(())
}

/// Copies a chart directory, renaming the chart in its `Chart.yaml`.
fn copy_renamed(from: &Path, to: &Path, name: &str) -> anyhow::Result<()> {
    copy_dir(from, to)?;
    let chart_yaml = to.join("Chart.yaml");
    let text = std::fs::read_to_string(&chart_yaml)?;
    let mut found = false;
    let renamed: Vec<String> = text
        .lines()
        .map(|l| {
            if !found && l.starts_with("name:") {
                found = true;
                format!("name: {name}")
            } else {
                l.to_string()
            }
        })
        .collect();
    if !found {
        bail!("{}: no top-level `name:` line", chart_yaml.display());
    }
    std::fs::write(&chart_yaml, renamed.join("\n") + "\n")?;
    Ok(())
}

fn copy_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

async fn package(helm: &Path, helm_home: &Path, job: PackageJob) -> anyhow::Result<PublishedChart> {
    std::fs::create_dir_all(&job.out_dir)?;
    let out = tokio::process::Command::new(helm)
        .arg("package")
        .arg(&job.source)
        .args(["--version", &job.version, "--app-version", &job.app_version])
        .arg("--destination")
        .arg(&job.out_dir)
        .env("HELM_CACHE_HOME", helm_home.join("cache"))
        .env("HELM_CONFIG_HOME", helm_home.join("config"))
        .env("HELM_DATA_HOME", helm_home.join("data"))
        .kill_on_drop(true)
        .output()
        .await
        .with_context(|| format!("running {}", helm.display()))?;
    if !out.status.success() {
        bail!(
            "helm package {} --version {}: {}{}",
            job.source.display(),
            job.version,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let file = job
        .out_dir
        .join(format!("{}-{}.tgz", job.name, job.version));
    let data = std::fs::read(&file).with_context(|| {
        format!(
            "helm package did not write {}: {}",
            file.display(),
            String::from_utf8_lossy(&out.stdout)
        )
    })?;
    let url = match &job.kind {
        RepositoryKind::Http { .. } => {
            format!("{}/{}-{}.tgz", job.repository, job.name, job.version)
        }
        RepositoryKind::Oci { .. } => format!("{}/{}:{}", job.repository, job.name, job.version),
    };
    Ok(PublishedChart {
        repository: job.repository,
        host: job.host,
        kind: job.kind,
        name: job.name,
        version: job.version,
        app_version: job.app_version,
        package: file,
        sha256: sha256_hex(&data),
        url,
    })
}

pub fn sha256_hex(data: &[u8]) -> String {
    crate::util::hex(&Sha256::digest(data))
}

/// A chart's `Chart.yaml` as Helm's `chart.Metadata`, with its JSON field order and omissions
/// (the OCI config blob is `json.Marshal(metadata)`).
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChartMetadata {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub home: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keywords: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub maintainers: Vec<Maintainer>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub icon: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub condition: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tags: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub app_version: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deprecated: bool,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kube_version: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<Value>,
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    pub chart_type: String,
}

#[derive(Debug, Default, Deserialize, Serialize)]
pub struct Maintainer {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub email: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub url: String,
}

/// The `Chart.yaml` inside a package (`<name>/Chart.yaml`), as `helm package` wrote it (with
/// `--version`/`--app-version` applied).
pub fn package_metadata(tgz: &[u8]) -> anyhow::Result<ChartMetadata> {
    let mut tar = Vec::new();
    flate2::read::GzDecoder::new(tgz)
        .read_to_end(&mut tar)
        .context("decompressing the package")?;
    let data = tar_member(&tar, |path| {
        let mut parts = path.split('/');
        parts.next().is_some_and(|d| !d.is_empty())
            && parts.next() == Some("Chart.yaml")
            && parts.next().is_none()
    })
    .context("no Chart.yaml in the package")?;
    let text = std::str::from_utf8(data).context("the packaged Chart.yaml is not UTF-8")?;
    serde_saphyr::from_str(text).context("parsing the packaged Chart.yaml")
}

/// The first regular file of a tar archive whose path satisfies `want` (ustar headers, with
/// the PAX `path` records Go's archive/tar writes for long names).
fn tar_member(tar: &[u8], want: impl Fn(&str) -> bool) -> Option<&[u8]> {
    fn text(field: &[u8]) -> String {
        let end = field.iter().position(|b| *b == 0).unwrap_or(field.len());
        String::from_utf8_lossy(&field[..end]).into_owned()
    }
    let mut offset = 0;
    let mut pax_path: Option<String> = None;
    while offset + 512 <= tar.len() {
        let header = &tar[offset..offset + 512];
        if header.iter().all(|b| *b == 0) {
            return None;
        }
        let size = usize::from_str_radix(text(&header[124..136]).trim(), 8).ok()?;
        let start = offset + 512;
        let data = tar.get(start..start.checked_add(size)?)?;
        let name = text(&header[0..100]);
        let prefix = text(&header[345..500]);
        match header[156] {
            b'x' => {
                // Records `<len> <key>=<value>\n`.
                pax_path = String::from_utf8_lossy(data)
                    .lines()
                    .filter_map(|l| l.split_once(' ').map(|(_, kv)| kv))
                    .find_map(|kv| kv.strip_prefix("path=").map(str::to_string));
            }
            b'0' | 0 => {
                let path = pax_path.take().unwrap_or_else(|| {
                    if prefix.is_empty() {
                        name.clone()
                    } else {
                        format!("{prefix}/{name}")
                    }
                });
                if want(&path) {
                    return Some(data);
                }
            }
            _ => pax_path = None,
        }
        offset = start + size.div_ceil(512) * 512;
    }
    None
}

/// `index.yaml` of every classic repository, and the packages at the URLs it names.
fn publish_http(catalog: &mut Catalog) -> anyhow::Result<()> {
    let mut indexes: BTreeMap<(String, String), BTreeMap<String, Vec<Value>>> = BTreeMap::new();
    for p in &catalog.published {
        let RepositoryKind::Http { path } = &p.kind else {
            continue;
        };
        let data = std::fs::read(&p.package)?;
        let meta = package_metadata(&data)?;
        let mut entry = serde_json::to_value(&meta)?;
        entry["urls"] = json!([p.url]);
        entry["created"] = json!(CREATED);
        entry["digest"] = json!(p.sha256);
        indexes
            .entry((p.host.clone(), path.clone()))
            .or_default()
            .entry(p.name.clone())
            .or_default()
            .push(entry);
        catalog.files.insert(
            (
                p.host.clone(),
                format!("{path}/{}-{}.tgz", p.name, p.version),
            ),
            Content {
                media_type: "application/gzip".into(),
                body: Bytes::from(data),
            },
        );
    }
    for ((host, path), mut entries) in indexes {
        // Newest first, as `helm repo index` writes them.
        for versions in entries.values_mut() {
            versions.sort_by(|a, b| {
                semver_key(b["version"].as_str().unwrap_or_default())
                    .cmp(&semver_key(a["version"].as_str().unwrap_or_default()))
            });
        }
        let index = json!({"apiVersion": "v1", "entries": entries, "generated": CREATED});
        catalog.files.insert(
            (host, format!("{path}/index.yaml")),
            Content {
                media_type: "application/x-yaml".into(),
                body: Bytes::from(to_yaml(&index)),
            },
        );
    }
    Ok(())
}

/// Orders `1.16.3` < `1.17.9` < `1.18.4` (numeric parts; anything else after them).
fn semver_key(v: &str) -> (Vec<u64>, String) {
    let (core, rest) = v.split_once(['-', '+']).unwrap_or((v, ""));
    (
        core.split('.').map(|n| n.parse().unwrap_or(0)).collect(),
        rest.to_string(),
    )
}

/// Block YAML of a JSON value, every scalar written as JSON (a JSON string is a valid YAML
/// double-quoted scalar), so nothing is re-typed on the way (`created`, digests, versions).
pub fn to_yaml(v: &Value) -> String {
    let mut out = String::new();
    write_yaml(v, 0, &mut out);
    out
}

fn write_yaml(v: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(map) => {
            for (k, val) in map {
                out.push_str(&pad);
                out.push_str(&scalar(&Value::String(k.clone())));
                out.push(':');
                write_child(val, indent, out);
            }
        }
        Value::Array(items) => {
            for item in items {
                out.push_str(&pad);
                out.push('-');
                match item {
                    Value::Object(m) if !m.is_empty() => {
                        // `- key: value` with the rest of the map aligned under the first key.
                        let mut first = String::new();
                        write_yaml(item, indent + 2, &mut first);
                        out.push(' ');
                        out.push_str(first.trim_start());
                    }
                    _ => write_child(item, indent, out),
                }
            }
        }
        _ => {
            out.push_str(&pad);
            out.push_str(&scalar(v));
            out.push('\n');
        }
    }
}

fn write_child(v: &Value, indent: usize, out: &mut String) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            write_yaml(v, indent + 2, out);
        }
        Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            write_yaml(v, indent, out);
        }
        _ => {
            out.push(' ');
            out.push_str(&scalar(v));
            out.push('\n');
        }
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::Object(m) if m.is_empty() => "{}".into(),
        Value::Array(a) if a.is_empty() => "[]".into(),
        other => other.to_string(),
    }
}

/// The OCI manifests, configs and layers of every OCI-published chart version, as `helm push`
/// makes them: config = the chart's metadata as JSON, one chart layer = the package.
fn publish_oci(catalog: &mut Catalog) -> anyhow::Result<()> {
    for p in &catalog.published {
        let RepositoryKind::Oci { namespace } = &p.kind else {
            continue;
        };
        let data = std::fs::read(&p.package)?;
        let meta = package_metadata(&data)?;
        let config = Content {
            media_type: HELM_CONFIG.into(),
            body: Bytes::from(serde_json::to_vec(&meta)?),
        };
        let layer = Content {
            media_type: HELM_CHART_LAYER.into(),
            body: Bytes::from(data),
        };
        let mut annotations = BTreeMap::new();
        for (k, v) in [
            ("org.opencontainers.image.created", CREATED),
            ("org.opencontainers.image.description", &meta.description),
            ("org.opencontainers.image.title", &meta.name),
            ("org.opencontainers.image.version", &meta.version),
            ("org.opencontainers.image.url", &meta.home),
            (
                "org.opencontainers.image.source",
                meta.sources.first().map(String::as_str).unwrap_or_default(),
            ),
        ] {
            if !v.is_empty() {
                annotations.insert(k.to_string(), v.to_string());
            }
        }
        for (k, v) in &meta.annotations {
            annotations.entry(k.clone()).or_insert_with(|| v.clone());
        }
        let manifest = json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": HELM_CONFIG, "digest": config.digest(), "size": config.body.len()},
            "layers": [{"mediaType": HELM_CHART_LAYER, "digest": layer.digest(), "size": layer.body.len()}],
            "annotations": annotations,
        });
        let manifest = Content {
            media_type: OCI_MANIFEST.into(),
            body: Bytes::from(serde_json::to_vec(&manifest)?),
        };
        let repo = catalog
            .oci
            .entry(p.host.clone())
            .or_default()
            .entry(format!("{namespace}/{}", p.name))
            .or_default();
        repo.tags.push((p.version.clone(), manifest.digest()));
        repo.manifests.insert(manifest.digest(), manifest);
        repo.blobs.insert(config.digest(), config);
        repo.blobs.insert(layer.digest(), layer);
    }
    for repos in catalog.oci.values_mut() {
        for repo in repos.values_mut() {
            repo.tags.sort_by_key(|t| semver_key(&t.0));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_urls_split_into_host_and_kind() {
        assert_eq!(
            parse_url("https://helm.cilium.io").unwrap(),
            (
                "helm.cilium.io".into(),
                RepositoryKind::Http {
                    path: String::new()
                }
            )
        );
        assert_eq!(
            parse_url("https://argoproj.github.io/argo-helm/").unwrap(),
            (
                "argoproj.github.io".into(),
                RepositoryKind::Http {
                    path: "/argo-helm".into()
                }
            )
        );
        assert_eq!(
            parse_url("oci://ghcr.io/controlplaneio-fluxcd/charts").unwrap(),
            (
                "ghcr.io".into(),
                RepositoryKind::Oci {
                    namespace: "controlplaneio-fluxcd/charts".into()
                }
            )
        );
        assert!(parse_url("oci://ghcr.io").is_err());
        assert!(parse_url("http://x:8080").is_err());
    }

    #[test]
    fn yaml_keeps_every_scalar_a_string_where_it_was_one() {
        let v = json!({"apiVersion": "v1", "entries": {"c": [{"created": CREATED, "digest": "12e4", "urls": ["https://x/c-1.0.0.tgz"], "keywords": [], "annotations": {"a/b": "true"}}]}, "n": 1});
        let text = to_yaml(&v);
        let back: Value = serde_saphyr::from_str(&text).unwrap();
        assert_eq!(back, v, "{text}");
        assert!(
            text.contains("  \"c\":\n  - \"annotations\":\n      \"a/b\": \"true\"\n"),
            "{text}"
        );
    }

    /// A tar entry: a ustar header (name, octal size, type) and its padded data.
    fn entry(name: &str, kind: u8, data: &[u8]) -> Vec<u8> {
        let mut h = vec![0u8; 512];
        h[..name.len()].copy_from_slice(name.as_bytes());
        let size = format!("{:011o}", data.len());
        h[124..135].copy_from_slice(size.as_bytes());
        h[156] = kind;
        h[257..263].copy_from_slice(b"ustar\0");
        let mut out = h;
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
        out
    }

    #[test]
    fn tar_members_are_found_by_ustar_name_or_pax_path() {
        let long = format!("c/templates/{}.yaml", "x".repeat(120));
        let record = format!("path={long}\n");
        let pax = format!("{} {record}", record.len() + 4);
        let mut tar = entry("c/", b'5', b"");
        tar.extend(entry("c/values.yaml", b'0', b"a: 1\n"));
        tar.extend(entry("PaxHeaders/x", b'x', pax.as_bytes()));
        tar.extend(entry("truncated-name", b'0', b"name: long\n"));
        tar.extend(entry("c/Chart.yaml", b'0', b"name: c\n"));
        tar.extend([0u8; 1024]);
        assert_eq!(
            tar_member(&tar, |p| p == "c/values.yaml"),
            Some(&b"a: 1\n"[..])
        );
        assert_eq!(tar_member(&tar, |p| p == long), Some(&b"name: long\n"[..]));
        assert_eq!(
            tar_member(&tar, |p| p == "c/Chart.yaml"),
            Some(&b"name: c\n"[..])
        );
        assert_eq!(tar_member(&tar, |p| p == "nope"), None);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &tar).unwrap();
        let meta = package_metadata(&gz.finish().unwrap()).unwrap();
        assert_eq!(meta.name, "c");
    }

    #[test]
    fn the_served_hostnames_are_those_of_the_repositories_file() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("charts");
        let hosts = served_hostnames(&dir).unwrap();
        for h in [
            "helm.cilium.io",
            "ghcr.io",
            "argoproj.github.io",
            "example.com",
        ] {
            assert!(hosts.contains(&h.to_string()), "{hosts:?}");
        }
    }
}
