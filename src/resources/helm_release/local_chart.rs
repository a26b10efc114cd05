//! Local chart directories (`chart = "./charts/app"`): their digest, read at plan (`chart_sha256`:
//! an edit inside one plans an upgrade without a version bump), and their package, made at apply
//! and shipped to the bootstrap Job.

use serde_json::Value as Json;

use crate::framework::PlanResponse;
use crate::framework::plan::mark_unknown;
use crate::values::{AttributePath, Value};

/// `chart` names a local chart directory when it is a path (`./charts/app`, `/srv/charts/app`).
pub fn local_chart(chart: &str) -> Option<&std::path::Path> {
    let path = std::path::Path::new(chart);
    (chart.starts_with("./") || chart.starts_with("../") || chart.starts_with('/')).then_some(path)
}

/// SHA-256 of a local chart directory's files (relative paths and contents, in path order): what
/// packaging ships, so a template edited without a version bump still plans an upgrade.
pub fn chart_digest(dir: &std::path::Path) -> Result<String, String> {
    use sha2::{Digest, Sha256};
    let mut files: Vec<(String, std::path::PathBuf)> = walk(dir)?
        .into_iter()
        .map(|e| {
            let path = e.path();
            let relative = path
                .strip_prefix(dir)
                .unwrap_or(&path)
                .to_string_lossy()
                .into_owned();
            (relative, path)
        })
        .collect();
    files.sort();
    let mut hasher = Sha256::new();
    for (relative, path) in files {
        let content = std::fs::read(&path)
            .map_err(|e| format!("local chart {}: {}", path.display(), e.kind()))?;
        hasher.update(relative.as_bytes());
        hasher.update([0]);
        hasher.update((content.len() as u64).to_be_bytes());
        hasher.update(&content);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// Plans `chart_sha256`: the digest of a local chart directory as it is now (unknown while `chart`
/// is), and an upgrade when it differs from the one in state. A directory that cannot be read is
/// an error at plan, on `chart`.
pub fn plan_chart_digest(resp: &mut PlanResponse, prior: Option<&Value>) {
    let digest = match resp.planned_state.attr("chart") {
        Some(Value::String(chart)) => match local_chart(chart) {
            Some(dir) => match chart_digest(dir) {
                Ok(d) => Value::from(d),
                Err(message) => {
                    resp.diagnostics.error_at(
                        AttributePath::attr("chart"),
                        "Local chart cannot be read",
                        format!("{message}. A local chart is read at plan (its digest) and packaged at apply: check the path (relative paths start at the root module's directory; `${{path.module}}/charts/app` is safer)."),
                    );
                    return;
                }
            },
            None => Value::Null,
        },
        Some(Value::Null) => Value::Null,
        _ => Value::unknown(),
    };
    let changed = prior.is_some_and(|p| !digest.is_unknown() && p != &digest);
    if let Some(attrs) = resp.planned_state.attrs_mut() {
        attrs.insert("chart_sha256".into(), digest);
    }
    if changed {
        let schema = super::schema::schema();
        mark_unknown(&mut resp.planned_state, &schema.block.changed_by_update());
    }
}

/// The largest local chart shipped to the Job (the ConfigMap it travels in holds 1 MiB).
const MAX_LOCAL_CHART: u64 = 8 * 1024 * 1024;

/// Packages a local chart directory as Helm does (`<name>/...` in a gzipped tar), read at apply;
/// returns the chart's name (from `Chart.yaml`) and the archive.
pub fn package_chart(dir: &std::path::Path) -> Result<(String, Vec<u8>), String> {
    let chart_yaml = std::fs::read_to_string(dir.join("Chart.yaml")).map_err(|e| {
        format!(
            "local chart {}: cannot read Chart.yaml ({})",
            dir.display(),
            e.kind()
        )
    })?;
    let meta: Json = serde_saphyr::from_str(&chart_yaml).map_err(|_| {
        format!(
            "local chart {}: Chart.yaml is not valid YAML",
            dir.display()
        )
    })?;
    let name = meta
        .get("name")
        .and_then(Json::as_str)
        .filter(|n| !n.is_empty() && !n.contains('/'))
        .ok_or_else(|| format!("local chart {}: Chart.yaml has no `name`", dir.display()))?
        .to_owned();
    let mut total = 0u64;
    for entry in walk(dir)? {
        total += entry.metadata().map(|m| m.len()).unwrap_or(0);
    }
    if total > MAX_LOCAL_CHART {
        return Err(format!(
            "local chart {} is {} KiB: too large to ship to the bootstrap Job; publish it to an OCI registry or a chart repository",
            dir.display(),
            total / 1024
        ));
    }
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let mut tar = tar::Builder::new(gz);
    tar.mode(tar::HeaderMode::Deterministic);
    tar.append_dir_all(&name, dir).map_err(|e| {
        format!(
            "local chart {}: cannot package it ({})",
            dir.display(),
            e.kind()
        )
    })?;
    let gz = tar
        .into_inner()
        .map_err(|e| format!("cannot package the chart ({})", e.kind()))?;
    let archive = gz
        .finish()
        .map_err(|e| format!("cannot package the chart ({})", e.kind()))?;
    Ok((name, archive))
}

fn walk(dir: &std::path::Path) -> Result<Vec<std::fs::DirEntry>, String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d)
            .map_err(|e| format!("local chart {}: {}", d.display(), e.kind()))?;
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(entry.path());
            } else {
                out.push(entry);
            }
        }
    }
    Ok(out)
}
