//! A small `kubectl`: `apply -f FILE...` (multi-document YAML, server-side apply),
//! `create namespace NAME`, `get TYPE [NAME] [-o name]`, `delete TYPE NAME [--ignore-not-found]`,
//! `wait --for=condition=C[=V]|--for=delete TYPE/NAME [--timeout=D]`,
//! `rollout status deployment/NAME`, `version`. It connects to the API endpoint from its
//! environment first, and fails with kubectl's texts when it cannot. Errors go to stderr.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::flags::{self, Flag};
use super::helm::parse_duration;
use super::{Exit, Program, ProgramContext, ProgramFuture, manifests};
use crate::cluster::network::DialError;
use crate::cluster::obj;
use crate::store::{ApiError, Patch, ResourceType, WriteOptions};

/// See the module docs.
pub struct Kubectl;

impl Program for Kubectl {
    fn run(&self, ctx: ProgramContext) -> ProgramFuture {
        Box::pin(async move {
            let result = match Args::parse(&ctx.argv[1..]) {
                Ok(args) => run(&ctx, &args).await,
                Err(e) => Err(e),
            };
            match result {
                Ok(()) => Exit::ok(),
                Err(message) => {
                    ctx.err(&message);
                    Exit::code(1)
                }
            }
        })
    }
}

#[derive(Debug, Default)]
struct Args {
    positional: Vec<String>,
    namespace: Option<String>,
    files: Vec<String>,
    output: Option<String>,
    wait_for: Option<String>,
    timeout: Option<Duration>,
    force_conflicts: bool,
    ignore_not_found: bool,
}

/// kubectl's global flags.
const GLOBAL: &[Flag] = &[
    flags::value("namespace").short('n'),
    flags::value("kubeconfig"),
    flags::value("context"),
    flags::value("cluster"),
    flags::value("user"),
    flags::value("server").short('s'),
    flags::value("token"),
    flags::value("request-timeout"),
    flags::value("certificate-authority"),
    flags::value("client-certificate"),
    flags::value("client-key"),
    flags::value("tls-server-name"),
    flags::boolean("insecure-skip-tls-verify"),
    flags::value("as"),
    flags::value("as-group"),
    flags::value("as-uid"),
    flags::value("cache-dir"),
    flags::boolean("match-server-version"),
    flags::boolean("warnings-as-errors"),
    flags::value("v").short('v'),
    flags::boolean("help").short('h'),
];

const APPLY: &[Flag] = &[
    flags::value("filename").short('f'),
    flags::boolean("recursive").short('R'),
    flags::value("kustomize").short('k'),
    flags::boolean("server-side"),
    flags::boolean("force-conflicts"),
    flags::value("field-manager"),
    flags::optional("dry-run", "unchanged"),
    flags::value("output").short('o'),
    flags::value("selector").short('l'),
    flags::boolean("prune"),
    flags::optional("validate", "strict"),
    flags::boolean("overwrite"),
    flags::boolean("wait"),
    flags::value("timeout"),
    flags::boolean("force"),
    flags::value("grace-period"),
];

const GET: &[Flag] = &[
    flags::value("output").short('o'),
    flags::value("selector").short('l'),
    flags::boolean("all-namespaces").short('A'),
    flags::value("field-selector"),
    flags::boolean("watch").short('w'),
    flags::boolean("ignore-not-found"),
    flags::boolean("show-labels"),
    flags::boolean("no-headers"),
    flags::value("chunk-size"),
    flags::value("sort-by"),
    flags::value("label-columns").short('L'),
    flags::value("filename").short('f'),
];

const DELETE: &[Flag] = &[
    flags::boolean("ignore-not-found"),
    flags::optional("wait", "true"),
    flags::value("timeout"),
    flags::value("grace-period"),
    flags::boolean("force"),
    flags::optional("cascade", "background"),
    flags::boolean("all"),
    flags::value("selector").short('l'),
    flags::value("filename").short('f'),
    flags::boolean("now"),
    flags::value("output").short('o'),
];

const WAIT: &[Flag] = &[
    flags::value("for"),
    flags::value("timeout"),
    flags::boolean("all"),
    flags::value("selector").short('l'),
    flags::boolean("all-namespaces").short('A'),
    flags::value("filename").short('f'),
    flags::value("field-selector"),
    flags::value("output").short('o'),
];

const ROLLOUT: &[Flag] = &[
    flags::value("timeout"),
    flags::boolean("watch").short('w'),
    flags::value("revision"),
];

const CREATE: &[Flag] = &[
    optional_dry_run(),
    flags::value("output").short('o'),
    flags::boolean("save-config"),
    flags::value("field-manager"),
];

const fn optional_dry_run() -> Flag {
    flags::optional("dry-run", "unchanged")
}

const VERSION: &[Flag] = &[flags::boolean("client"), flags::value("output").short('o')];

impl Args {
    /// Parses kubectl's argv; unknown flags answer kubectl's
    /// `error: unknown flag: --foo` + `See 'kubectl CMD --help' for usage.`
    fn parse(argv: &[String]) -> Result<Args, String> {
        let cmd = flags::command(GLOBAL, argv)
            .map(|(_, c)| c)
            .unwrap_or_default();
        let own: &[Flag] = match cmd.as_str() {
            "apply" => APPLY,
            "get" => GET,
            "delete" => DELETE,
            "wait" => WAIT,
            "rollout" => ROLLOUT,
            "create" => CREATE,
            "version" => VERSION,
            _ => &[],
        };
        let known: Vec<Flag> = GLOBAL.iter().chain(own).copied().collect();
        let p = flags::parse(&known, argv).map_err(|e| {
            let path = match cmd.as_str() {
                "rollout" => "kubectl rollout status".to_string(),
                "" => "kubectl".to_string(),
                c => format!("kubectl {c}"),
            };
            format!("error: {e}\nSee '{path} --help' for usage.")
        })?;
        let timeout = p.get("timeout").and_then(parse_duration);
        Ok(Args {
            namespace: p.get("namespace").map(String::from),
            files: p.all("filename"),
            output: p.get("output").map(String::from),
            wait_for: p.get("for").map(String::from),
            timeout,
            force_conflicts: p.on("force-conflicts"),
            ignore_not_found: p.on("ignore-not-found"),
            positional: p.positional,
        })
    }
}

fn unreachable(ctx: &ProgramContext, e: &DialError) -> String {
    match e {
        DialError::Refused { .. } => format!(
            "The connection to the server {} was refused - did you specify the right host or port?",
            ctx.endpoint()
        ),
        _ => format!("Unable to connect to the server: {e}"),
    }
}

async fn run(ctx: &ProgramContext, args: &Args) -> Result<(), String> {
    let cmd = args.positional.first().map(String::as_str).unwrap_or("");
    if cmd == "version" {
        ctx.out("Client Version: v1.33.0");
        ctx.out("Kustomize Version: v5.6.0");
    }
    if let Err(e) = ctx.dial_api().await {
        if cmd == "apply" {
            let file = args.files.first().map(String::as_str).unwrap_or("STDIN");
            let url = ctx.endpoint().url();
            return Err(format!(
                "error: error validating \"{file}\": error validating data: failed to download openapi: Get \"{url}/openapi/v2?timeout=32s\": {e}; if you choose to ignore these errors, turn validation off with --validate=false"
            ));
        }
        return Err(unreachable(ctx, &e));
    }
    match cmd {
        "version" => {
            ctx.out("Server Version: v1.33.0");
            Ok(())
        }
        "apply" => apply(ctx, args),
        "create"
            if args
                .positional
                .get(1)
                .is_some_and(|k| k == "namespace" || k == "ns") =>
        {
            create_namespace(ctx, args)
        }
        "get" => get(ctx, args),
        "delete" => delete(ctx, args),
        "wait" => wait(ctx, args).await,
        "rollout" => rollout_status(ctx, args).await,
        other => Err(format!(
            "error: unknown command \"{other}\" for \"kubectl\""
        )),
    }
}

/// `deployment.apps` / `namespace` as kubectl prints a type.
fn type_name(ty: &ResourceType) -> String {
    match ty.group.as_str() {
        "" => ty.kind.to_lowercase(),
        g => format!("{}.{g}", ty.kind.to_lowercase()),
    }
}

/// Resolves `deploy`, `deployments.apps`, `fluxinstance`, `crd`, ...
fn resolve(ctx: &ProgramContext, name: &str) -> Result<ResourceType, String> {
    let (base, group) = match name.split_once('.') {
        Some((b, g)) => (b.to_lowercase(), Some(g.to_string())),
        None => (name.to_lowercase(), None),
    };
    ctx.store
        .resource_types()
        .into_iter()
        .filter(|t| group.as_ref().is_none_or(|g| *g == t.group))
        .find(|t| {
            t.resource == base
                || t.singular == base
                || t.kind.to_lowercase() == base
                || t.short_names.contains(&base)
        })
        .ok_or_else(|| format!("error: the server doesn't have a resource type \"{name}\""))
}

/// `TYPE/NAME` or `TYPE NAME` from positional arguments starting at `from`.
fn target(
    ctx: &ProgramContext,
    args: &Args,
    from: usize,
) -> Result<(ResourceType, String), String> {
    let first = args
        .positional
        .get(from)
        .ok_or_else(|| "error: you must specify the type of resource".to_string())?;
    let (ty, name) = match first.split_once('/') {
        Some((t, n)) => (t.to_string(), n.to_string()),
        None => (
            first.clone(),
            args.positional.get(from + 1).cloned().unwrap_or_default(),
        ),
    };
    Ok((resolve(ctx, &ty)?, name))
}

fn namespace_for(ty: &ResourceType, args: &Args, declared: &str) -> String {
    match (ty.namespaced, declared) {
        (false, _) => String::new(),
        (true, "") => args.namespace.clone().unwrap_or_else(|| "default".into()),
        (true, ns) => ns.to_string(),
    }
}

fn server_error(e: &ApiError, action: &str) -> String {
    format!("Error from server ({}): {action}{}", e.reason, e.message)
}

fn apply(ctx: &ProgramContext, args: &Args) -> Result<(), String> {
    for file in &args.files {
        let text = ctx
            .read_file(file)
            .map_err(|e| format!("error: the path \"{file}\" does not exist ({e})"))?;
        for doc in manifests::parse_manifest(&format!("\n{}", String::from_utf8_lossy(&text))) {
            let ty = ctx.store.find_type(obj::s(&doc, "/apiVersion"), obj::s(&doc, "/kind")).ok_or_else(|| {
                format!("error: resource mapping not found for name: \"{}\" namespace: \"{}\" from \"{file}\": no matches for kind \"{}\" in version \"{}\"\nensure CRDs are installed first", obj::name(&doc), obj::namespace(&doc), obj::s(&doc, "/kind"), obj::s(&doc, "/apiVersion"))
            })?;
            let ns = namespace_for(&ty, args, obj::namespace(&doc));
            let opts = WriteOptions {
                field_manager: Some("kubectl".into()),
                force: args.force_conflicts,
                dry_run: false,
            };
            let existed = ctx
                .store
                .get(&ty.group_resource(), &ns, obj::name(&doc))
                .is_ok();
            ctx.store
                .patch(
                    &ty.group_resource(),
                    &ns,
                    obj::name(&doc),
                    Patch::Apply(doc.clone()),
                    &opts,
                )
                .map_err(|e| {
                    server_error(&e, &format!("error when applying patch to \"{file}\": "))
                })?;
            let verb = if existed {
                "serverside-applied"
            } else {
                "created"
            };
            ctx.out(&format!("{}/{} {verb}", type_name(&ty), obj::name(&doc)));
        }
    }
    Ok(())
}

fn create_namespace(ctx: &ProgramContext, args: &Args) -> Result<(), String> {
    let name = args.positional.get(2).cloned().unwrap_or_default();
    let body = serde_json::json!({"metadata": {"name": name}});
    ctx.store
        .create(
            &crate::store::GroupResource::core("namespaces"),
            "",
            body,
            &obj::manager("kubectl-create"),
        )
        .map_err(|e| server_error(&e, ""))?;
    ctx.out(&format!("namespace/{name} created"));
    Ok(())
}

fn get(ctx: &ProgramContext, args: &Args) -> Result<(), String> {
    let (ty, name) = target(ctx, args, 1)?;
    let ns = namespace_for(&ty, args, "");
    let items: Vec<Value> = if name.is_empty() {
        ctx.store
            .list(
                &ty.group_resource(),
                ty.namespaced.then_some(ns.as_str()),
                &Default::default(),
            )
            .map_err(|e| server_error(&e, ""))?
            .items
    } else {
        vec![
            ctx.store
                .get(&ty.group_resource(), &ns, &name)
                .map_err(|e| server_error(&e, ""))?,
        ]
    };
    if args.output.as_deref() != Some("name") {
        ctx.out("NAME");
    }
    for o in items {
        match args.output.as_deref() {
            Some("name") => ctx.out(&format!("{}/{}", type_name(&ty), obj::name(&o))),
            _ => ctx.out(obj::name(&o)),
        }
    }
    Ok(())
}

fn delete(ctx: &ProgramContext, args: &Args) -> Result<(), String> {
    let (ty, name) = target(ctx, args, 1)?;
    let ns = namespace_for(&ty, args, "");
    match ctx
        .store
        .delete(&ty.group_resource(), &ns, &name, &Default::default())
    {
        Ok(_) => ctx.out(&format!("{} \"{name}\" deleted", type_name(&ty))),
        Err(e) if e.code == 404 && args.ignore_not_found => {}
        Err(e) => return Err(server_error(&e, "")),
    }
    Ok(())
}

async fn wait(ctx: &ProgramContext, args: &Args) -> Result<(), String> {
    let (ty, name) = target(ctx, args, 1)?;
    let ns = namespace_for(&ty, args, "");
    let spec = args.wait_for.clone().unwrap_or_default();
    let timeout = ctx
        .config
        .pace
        .scale(args.timeout.unwrap_or(Duration::from_secs(30)));
    let start = Instant::now();
    let shown = format!("{}/{name}", type_name(&ty));
    loop {
        let live = ctx.store.get(&ty.group_resource(), &ns, &name);
        let met = match (spec.as_str(), &live) {
            ("delete", Err(e)) if e.code == 404 => true,
            (s, Ok(o)) if s.starts_with("condition=") => {
                let cond = &s["condition=".len()..];
                let (ty_, want) = cond.split_once('=').unwrap_or((cond, "True"));
                obj::condition(o, ty_)
                    .is_some_and(|c| obj::s(c, "/status").eq_ignore_ascii_case(want))
            }
            _ => false,
        };
        if met {
            ctx.out(&format!("{shown} condition met"));
            return Ok(());
        }
        if let Err(e) = &live {
            if e.code == 404 && spec != "delete" && start.elapsed() >= timeout {
                return Err(server_error(e, ""));
            }
        }
        if start.elapsed() >= timeout {
            return Err(format!(
                "error: timed out waiting for the condition on {shown}"
            ));
        }
        ctx.sleep(Duration::from_secs(1)).await;
    }
}

async fn rollout_status(ctx: &ProgramContext, args: &Args) -> Result<(), String> {
    let (ty, name) = target(ctx, args, 2)?;
    let ns = namespace_for(&ty, args, "");
    let timeout = ctx
        .config
        .pace
        .scale(args.timeout.unwrap_or(Duration::from_secs(600)));
    let start = Instant::now();
    let (ready, wanted) = match ty.kind.as_str() {
        "DaemonSet" => ("/status/numberReady", "/status/desiredNumberScheduled"),
        _ => ("/status/readyReplicas", "/spec/replicas"),
    };
    loop {
        let live = ctx
            .store
            .get(&ty.group_resource(), &ns, &name)
            .map_err(|e| server_error(&e, ""))?;
        if manifests::workload_ready(&live, ready, wanted) {
            ctx.out(&format!(
                "{} \"{name}\" successfully rolled out",
                ty.kind.to_lowercase()
            ));
            return Ok(());
        }
        if start.elapsed() >= timeout {
            return Err("error: timed out waiting for the condition".into());
        }
        ctx.sleep(Duration::from_secs(1)).await;
    }
}
