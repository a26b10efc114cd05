//! Helm's read-only release commands: `status`, `history`, `list`, reading the release records
//! ([`super::release`]) with the pod's permissions, printing tables or `-o json|yaml`.

use serde_json::{Value, json};

use super::ProgramContext;
use super::helm::Args;
use super::release::{self, Release};

/// The release summary `install`/`upgrade` and `status` print.
pub(super) fn print_status(ctx: &ProgramContext, r: &Release) {
    ctx.out(&format!("NAME: {}", r.name));
    ctx.out(&format!("LAST DEPLOYED: {}", r.last_deployed));
    ctx.out(&format!("NAMESPACE: {}", r.namespace));
    ctx.out(&format!("STATUS: {}", r.status));
    ctx.out(&format!("REVISION: {}", r.version));
    ctx.out("TEST SUITE: None");
}

/// `helm status NAME [-o json|yaml|table]`.
pub(super) fn status(
    ctx: &ProgramContext,
    args: &Args,
    ns: &str,
    name: &str,
) -> Result<(), String> {
    let history = release::history(&ctx.store, ns, name).map_err(|e| e.to_string())?;
    let last = history
        .last()
        .ok_or_else(|| "release: not found".to_string())?;
    match args.output.as_deref() {
        Some("json") => ctx.out(&last.to_json().to_string()),
        Some("yaml") => ctx.out(&serde_saphyr::to_string(&last.to_json()).unwrap_or_default()),
        Some("table") | None => print_status(ctx, last),
        Some(other) => return Err(format!("invalid format type \"{other}\"")),
    }
    Ok(())
}

/// `helm history NAME [-o json|yaml|table]`.
pub(super) fn history(
    ctx: &ProgramContext,
    args: &Args,
    ns: &str,
    name: &str,
) -> Result<(), String> {
    let revisions = release::history(&ctx.store, ns, name).map_err(|e| e.to_string())?;
    if revisions.is_empty() {
        return Err("release: not found".into());
    }
    let rows: Vec<Value> = revisions
        .iter()
        .map(|r| {
            json!({"revision": r.version, "updated": r.last_deployed, "status": r.status,
                "chart": format!("{}-{}", r.chart, r.chart_version), "app_version": r.app_version,
                "description": r.description})
        })
        .collect();
    match args.output.as_deref() {
        Some("json") => ctx.out(&Value::Array(rows).to_string()),
        Some("yaml") => ctx.out(&serde_saphyr::to_string(&rows).unwrap_or_default()),
        Some("table") | None => {
            ctx.out("REVISION\tUPDATED\tSTATUS\tCHART\tAPP VERSION\tDESCRIPTION");
            for r in &revisions {
                ctx.out(&format!(
                    "{}\t{}\t{}\t{}-{}\t{}\t{}",
                    r.version,
                    r.last_deployed,
                    r.status,
                    r.chart,
                    r.chart_version,
                    r.app_version,
                    r.description
                ));
            }
        }
        Some(other) => return Err(format!("invalid format type \"{other}\"")),
    }
    Ok(())
}

/// `helm list [-A]`.
pub(super) fn list(ctx: &ProgramContext, args: &Args, ns: &str) -> Result<(), String> {
    let scope = if args.all_namespaces { None } else { Some(ns) };
    let releases = release::list(&ctx.store, scope).map_err(|e| e.to_string())?;
    ctx.out("NAME\tNAMESPACE\tREVISION\tUPDATED\tSTATUS\tCHART\tAPP VERSION");
    for r in releases {
        ctx.out(&format!(
            "{}\t{}\t{}\t{}\t{}\t{}-{}\t{}",
            r.name,
            r.namespace,
            r.version,
            r.last_deployed,
            r.status,
            r.chart,
            r.chart_version,
            r.app_version
        ));
    }
    Ok(())
}
