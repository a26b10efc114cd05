//! The `helm` CLI (v3/v4 behaviour): `upgrade [--install]`, `install`, `uninstall`, `template`
//! ([`super::helm_template`]), `status`, `list`, `history` ([`super::helm_read`]), `version`,
//! with `-n/--namespace`, `--create-namespace`, `--version`, `-f/--values`, `--set`,
//! `--set-string`, `--wait`, `--timeout`. Release records are real Helm Secrets
//! ([`super::release`]); charts render from [`super::charts`]. Every command but `template` and
//! `version` first connects to the API endpoint from its environment: unreachable →
//! `Error: Kubernetes cluster unreachable: ...`. Helm's output goes to stdout, its `Error: ...`
//! to stderr.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::charts::Chart;
use super::flags::{self, Parsed};
use super::helm_flags::{GLOBAL, known_flags};
use super::helm_read::{self, print_status};
use super::helm_template::{self, RenderOptions};
use super::release::{self, Release};
use super::{Exit, Program, ProgramContext, ProgramFuture, manifests, values};
use crate::cluster::obj;
use crate::store::GroupResource;

/// See the module docs.
pub struct Helm;

impl Program for Helm {
    fn run(&self, ctx: ProgramContext) -> ProgramFuture {
        Box::pin(async move {
            let result = match Args::parse(&ctx.argv[1..]) {
                Ok(args) => run(&ctx, &args).await,
                Err(e) => Err(e),
            };
            match result {
                Ok(()) => Exit::ok(),
                Err(message) => {
                    ctx.err(&format!("Error: {message}"));
                    Exit::code(1)
                }
            }
        })
    }
}

/// Parsed command line.
#[derive(Debug, Default)]
pub struct Args {
    pub positional: Vec<String>,
    pub namespace: Option<String>,
    pub version: Option<String>,
    pub values_files: Vec<String>,
    pub sets: Vec<(String, bool)>,
    pub install: bool,
    pub create_namespace: bool,
    pub wait: bool,
    pub all_namespaces: bool,
    pub keep_history: bool,
    pub timeout: Option<Duration>,
    /// `--take-ownership` (Helm 3.17+): adopt existing objects instead of failing on them.
    pub take_ownership: bool,
    /// `--repo URL`: the chart is a name in that repository.
    pub repo: Option<String>,
    pub description: Option<String>,
    /// `-o/--output` (`table`, `json`, `yaml`).
    pub output: Option<String>,
    /// `-h/--help`.
    pub help: bool,
    /// `template`'s own flags.
    pub render: RenderOptions,
    /// Do not print Helm's own output (cilium-cli runs Helm in-process).
    pub quiet: bool,
}

impl Args {
    /// Parses helm's argv (without `helm`) the way cobra does: the subcommand, then its flags
    /// and the global ones; unknown flags and commands are errors worded like Helm's (the
    /// message without `Error: `).
    pub fn parse(argv: &[String]) -> Result<Args, String> {
        let cmd = flags::command(GLOBAL, argv)
            .map(|(_, c)| c)
            .unwrap_or_default();
        let known = match known_flags(&cmd) {
            Some(k) => k,
            None if cmd.is_empty() => GLOBAL.to_vec(),
            None => {
                return Err(format!(
                    "unknown command \"{cmd}\" for \"helm\"\nRun 'helm --help' for usage."
                ));
            }
        };
        let p = flags::parse(&known, argv).map_err(|e| e.to_string())?;
        Args::from_parsed(p)
    }

    /// The helm arguments of a parsed command line (cilium-cli passes its own).
    pub fn from_parsed(p: Parsed) -> Result<Args, String> {
        let timeout = match p.get("timeout") {
            Some(t) => Some(parse_duration(t).ok_or_else(|| {
                format!("invalid argument \"{t}\" for \"--timeout\" flag: time: invalid duration \"{t}\"")
            })?),
            None => None,
        };
        let mut sets = Vec::new();
        for (k, v) in &p.flags {
            match *k {
                "set" => sets.push((v.clone(), false)),
                "set-string" => sets.push((v.clone(), true)),
                _ => {}
            }
        }
        Ok(Args {
            render: RenderOptions::from_parsed(&p),
            namespace: p.get("namespace").map(String::from),
            version: p.get("version").map(String::from),
            values_files: p.all("values"),
            sets,
            install: p.on("install"),
            create_namespace: p.on("create-namespace"),
            wait: p.on("wait") || p.on("atomic"),
            all_namespaces: p.on("all-namespaces"),
            keep_history: p.on("keep-history"),
            take_ownership: p.on("take-ownership"),
            repo: p.get("repo").map(String::from),
            description: p.get("description").map(String::from),
            output: p.get("output").map(String::from),
            timeout,
            help: p.on("help"),
            quiet: false,
            positional: p.positional,
        })
    }

    pub(super) fn namespace(&self, ctx: &ProgramContext) -> String {
        self.namespace.clone().unwrap_or_else(|| {
            ctx.env
                .get("HELM_NAMESPACE")
                .cloned()
                .unwrap_or_else(|| "default".into())
        })
    }
}

/// `1h30m`, `5m`, `90s`, `300` (seconds).
pub fn parse_duration(s: &str) -> Option<Duration> {
    if let Ok(n) = s.parse::<u64>() {
        return Some(Duration::from_secs(n));
    }
    let (mut total, mut num) = (0f64, String::new());
    for c in s.chars() {
        if c.is_ascii_digit() || c == '.' {
            num.push(c);
            continue;
        }
        let n: f64 = std::mem::take(&mut num).parse().ok()?;
        total += n * match c {
            'h' => 3600.0,
            'm' => 60.0,
            's' => 1.0,
            _ => return None,
        };
    }
    num.is_empty().then(|| Duration::from_secs_f64(total))
}

async fn run(ctx: &ProgramContext, args: &Args) -> Result<(), String> {
    let cmd = args.positional.first().map(String::as_str).unwrap_or("");
    if cmd == "version" {
        ctx.out("version.BuildInfo{Version:\"v3.18.4\", GitCommit:\"d80839cf37d860c8aa9a0503fe463278f26cd5e2\", GitTreeState:\"clean\", GoVersion:\"go1.24.4\"}");
        return Ok(());
    }
    if cmd.is_empty() || args.help {
        ctx.out("The Kubernetes package manager");
        ctx.out("");
        ctx.out("Usage:");
        ctx.out("  helm [command]");
        return Ok(());
    }
    if cmd == "template" {
        // Client-only rendering: no API connection unless `--validate`.
        return helm_template::template(ctx, args, &args.namespace(ctx)).await;
    }
    if let Err(e) = ctx.dial_api().await {
        let prefix = if cmd == "install" {
            "INSTALLATION FAILED: "
        } else {
            ""
        };
        return Err(format!(
            "{prefix}Kubernetes cluster unreachable: Get \"{}/version\": {e}",
            ctx.endpoint().url()
        ));
    }
    let ns = args.namespace(ctx);
    let name = args.positional.get(1).cloned().unwrap_or_default();
    match cmd {
        "upgrade" | "install" => install_or_upgrade(ctx, args, cmd == "install", &ns, &name).await,
        "uninstall" | "delete" | "del" | "un" => uninstall(ctx, args, &ns, &name),
        "status" => helm_read::status(ctx, args, &ns, &name),
        "history" | "hist" => helm_read::history(ctx, args, &ns, &name),
        _ => helm_read::list(ctx, args, &ns),
    }
}

/// The user values of a command line: the `-f` files in order, then the `--set`s.
pub(super) fn load_values(ctx: &ProgramContext, args: &Args) -> Result<Value, String> {
    let mut vals = json!({});
    for f in &args.values_files {
        let bytes = ctx.read_file(f).map_err(|e| e.to_string())?;
        let v =
            values::from_yaml(f, &String::from_utf8_lossy(&bytes)).map_err(|e| e.to_string())?;
        values::merge(&mut vals, &v);
    }
    for (s, strings) in &args.sets {
        values::apply_set(&mut vals, s, *strings).map_err(|e| e.to_string())?;
    }
    Ok(vals)
}

/// `helm install` (`install_only`) or `helm upgrade [--install]` of release `name` in `ns`;
/// the error text is Helm's, without the `Error: ` prefix.
pub async fn install_or_upgrade(
    ctx: &ProgramContext,
    args: &Args,
    install_only: bool,
    ns: &str,
    name: &str,
) -> Result<(), String> {
    let chart_ref = args
        .positional
        .get(2)
        .cloned()
        .ok_or_else(|| "\"helm upgrade\" requires 2 arguments".to_string())?;
    let history = release::history(&ctx.store, ns, name)
        .map_err(|e| format!("query: failed to query with labels: {e}"))?;
    let last = history
        .last()
        .filter(|r| r.status != "uninstalled")
        .cloned();
    let vals = load_values(ctx, args)?;
    let chart = Chart::from_reference(&chart_ref, args.version.as_deref());
    let upgrading = match (&last, install_only) {
        (Some(_), true) => {
            return Err("INSTALLATION FAILED: cannot re-use a name that is still in use".into());
        }
        (None, false) if !args.install => {
            return Err(format!(
                "UPGRADE FAILED: \"{name}\" has no deployed releases"
            ));
        }
        (Some(l), false) if l.status.starts_with("pending-") => {
            return Err(
                "UPGRADE FAILED: another operation (install/upgrade/rollback) is in progress"
                    .into(),
            );
        }
        (Some(_), false) => true,
        (None, _) => false,
    };
    let failed_prefix = if upgrading {
        "UPGRADE FAILED: "
    } else {
        "INSTALLATION FAILED: "
    };
    if !upgrading && !install_only && !args.quiet {
        ctx.out(&format!(
            "Release \"{name}\" does not exist. Installing it now."
        ));
    }
    ensure_namespace(ctx, ns, args.create_namespace).map_err(|e| format!("{failed_prefix}{e}"))?;
    let version = history.last().map(|r| r.version + 1).unwrap_or(1);
    let current = current_release(&history, last.as_ref());
    let now = crate::util::now_rfc3339();
    let mut rel = Release {
        name: name.into(),
        namespace: ns.into(),
        version,
        status: if upgrading {
            "pending-upgrade"
        } else {
            "pending-install"
        }
        .into(),
        description: if upgrading {
            "Preparing upgrade"
        } else {
            "Initial install underway"
        }
        .into(),
        first_deployed: current
            .as_ref()
            .map(|l| l.first_deployed.clone())
            .unwrap_or_else(|| now.clone()),
        last_deployed: now,
        chart: chart.name.clone(),
        chart_version: chart.version.clone(),
        app_version: chart.app_version.clone(),
        config: vals.clone(),
        manifest: String::new(),
    };
    let objects = chart.render(name, ns, &vals);
    rel.manifest = manifests::manifest_text(&chart.name, &objects);
    let owned = current
        .as_ref()
        .map(|c| manifests::parse_manifest(&c.manifest))
        .unwrap_or_default();
    // Helm checks for objects it would take over before it records the revision.
    manifests::check_conflicts(
        &ctx.store,
        name,
        ns,
        &objects,
        &owned,
        upgrading,
        args.take_ownership,
    )
    .map_err(|e| format!("{failed_prefix}{e}"))?;
    release::save(&ctx.store, &rel).map_err(|e| e.to_string())?;
    ctx.sleep(Duration::from_secs(1)).await;
    if let Err(e) = deploy(ctx, args, &rel, current.as_ref(), &objects).await {
        rel.status = "failed".into();
        rel.description = format!("Release \"{name}\" failed: {e}");
        let _ = release::save(&ctx.store, &rel);
        return Err(format!("{failed_prefix}{e}"));
    }
    if let Some(mut prev) = current {
        prev.status = "superseded".into();
        prev.description = "Superseded".into();
        release::save(&ctx.store, &prev).map_err(|e| e.to_string())?;
    }
    rel.status = "deployed".into();
    rel.description = match &args.description {
        Some(d) => d.clone(),
        None if upgrading => "Upgrade complete".into(),
        None => "Install complete".into(),
    };
    release::save(&ctx.store, &rel).map_err(|e| e.to_string())?;
    if args.quiet {
        return Ok(());
    }
    if upgrading {
        ctx.out(&format!(
            "Release \"{name}\" has been upgraded. Happy Helming!"
        ));
    }
    print_status(ctx, &rel);
    Ok(())
}

/// The release an upgrade starts from (Helm's `prepareUpgrade`): the last revision when it is
/// deployed, else the latest deployed revision, else (no deployed revision) the last one when it
/// failed or was superseded. It is what a successful upgrade marks `superseded` and the manifest
/// removed objects are computed from; other revisions (e.g. a failed one after the deployed one)
/// keep their status.
fn current_release(history: &[Release], last: Option<&Release>) -> Option<Release> {
    let last = last?;
    if last.status == "deployed" {
        return Some(last.clone());
    }
    history
        .iter()
        .rev()
        .find(|r| r.status == "deployed")
        .or_else(|| {
            ["failed", "superseded"]
                .contains(&last.status.as_str())
                .then_some(last)
        })
        .cloned()
}

async fn deploy(
    ctx: &ProgramContext,
    args: &Args,
    rel: &Release,
    last: Option<&Release>,
    objects: &[Value],
) -> Result<(), String> {
    let previous = last
        .map(|prev| manifests::parse_manifest(&prev.manifest))
        .unwrap_or_default();
    manifests::apply(
        &ctx.store,
        &rel.name,
        &rel.namespace,
        objects,
        &previous,
        "helm",
    )
    .map_err(|e| e.to_string())?;
    if let Some(prev) = last {
        let keep = |o: &Value| {
            objects
                .iter()
                .any(|n| obj::name(n) == obj::name(o) && obj::s(n, "/kind") == obj::s(o, "/kind"))
        };
        let gone: Vec<Value> = manifests::parse_manifest(&prev.manifest)
            .into_iter()
            .filter(|o| !keep(o))
            .collect();
        manifests::delete(&ctx.store, &rel.namespace, &gone).map_err(|e| e.to_string())?;
    }
    if args.wait {
        let timeout = ctx
            .config
            .pace
            .scale(args.timeout.unwrap_or(Duration::from_secs(300)));
        let start = Instant::now();
        while !manifests::ready(&ctx.store, &rel.namespace, objects) {
            if start.elapsed() >= timeout {
                return Err("context deadline exceeded".into());
            }
            ctx.sleep(Duration::from_secs(2)).await;
        }
    }
    Ok(())
}

fn ensure_namespace(ctx: &ProgramContext, ns: &str, create: bool) -> Result<(), String> {
    let gr = GroupResource::core("namespaces");
    if !create {
        // Real Helm does not look at the namespace here: writing the release record fails with
        // this message. So no `get namespaces` permission is needed (the node's view checks).
        if ctx.store.system().get(&gr, "", ns).is_ok() {
            return Ok(());
        }
        return Err(format!(
            "create: failed to create: namespaces \"{ns}\" not found"
        ));
    }
    match ctx.store.get(&gr, "", ns) {
        Ok(_) => return Ok(()),
        Err(e) if e.code != 404 => return Err(e.to_string()),
        Err(_) => {}
    }
    let body = json!({"metadata": {"name": ns, "labels": {"name": ns}}});
    match ctx.store.create(&gr, "", body, &obj::manager("helm")) {
        Err(e) if e.code != 409 => Err(e.to_string()),
        _ => Ok(()),
    }
}

/// `helm uninstall`.
pub fn uninstall(ctx: &ProgramContext, args: &Args, ns: &str, name: &str) -> Result<(), String> {
    let history = release::history(&ctx.store, ns, name).map_err(|e| e.to_string())?;
    let Some(last) = history.last().cloned() else {
        return Err(format!(
            "uninstall: Release not loaded: {name}: release: not found"
        ));
    };
    manifests::delete(&ctx.store, ns, &manifests::parse_manifest(&last.manifest))
        .map_err(|e| e.to_string())?;
    if args.keep_history {
        let mut rel = last;
        rel.status = "uninstalled".into();
        rel.description = "Uninstallation complete".into();
        release::save(&ctx.store, &rel).map_err(|e| e.to_string())?;
    } else {
        release::purge(&ctx.store, ns, name).map_err(|e| e.to_string())?;
    }
    if !args.quiet {
        ctx.out(&format!("release \"{name}\" uninstalled"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_helm_arguments() {
        let argv: Vec<String> = [
            "upgrade",
            "--install",
            "flux-operator",
            "oci://ghcr.io/x/flux-operator",
            "-n",
            "flux-system",
            "--set=a=b",
            "--timeout",
            "1h30m",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let a = Args::parse(&argv).unwrap();
        assert_eq!(
            a.positional,
            ["upgrade", "flux-operator", "oci://ghcr.io/x/flux-operator"]
        );
        assert_eq!(a.namespace.as_deref(), Some("flux-system"));
        assert_eq!(a.sets, [("a=b".to_string(), false)]);
        assert_eq!(a.timeout, Some(Duration::from_secs(5400)));
        assert!(a.install);
    }

    #[test]
    fn unknown_flags_fail_like_cobra() {
        let parse = |s: &str| {
            Args::parse(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
                .map(|_| ())
                .unwrap_err()
        };
        assert_eq!(parse("upgrade --install r c --foo"), "unknown flag: --foo");
        assert_eq!(parse("upgrade -x r c"), "unknown shorthand flag: 'x' in -x");
        // `--keep-history` is uninstall's, `--install` is upgrade's only.
        assert_eq!(parse("install r c --install"), "unknown flag: --install");
        assert_eq!(
            parse("upgrade r c --max-history 3"),
            "unknown flag: --max-history"
        );
        assert_eq!(
            parse("frobnicate"),
            "unknown command \"frobnicate\" for \"helm\"\nRun 'helm --help' for usage."
        );
        let ok = Args::parse(
            &"upgrade --install cilium cilium --repo https://helm.cilium.io -n kube-system -f a.yaml -f b.yaml --take-ownership --history-max 5 --wait --timeout 10m --description x --atomic --skip-crds --no-hooks --create-namespace --set-string a=b"
                .split_whitespace()
                .map(String::from)
                .collect::<Vec<_>>(),
        )
        .unwrap();
        assert!(ok.take_ownership && ok.wait && ok.install && ok.create_namespace);
        assert_eq!(ok.repo.as_deref(), Some("https://helm.cilium.io"));
        assert_eq!(ok.values_files, ["a.yaml", "b.yaml"]);
    }

    fn rev(version: i64, status: &str) -> Release {
        Release {
            name: "r".into(),
            namespace: "ns".into(),
            version,
            status: status.into(),
            description: String::new(),
            first_deployed: String::new(),
            last_deployed: String::new(),
            chart: "c".into(),
            chart_version: "1".into(),
            app_version: "1".into(),
            config: json!({}),
            manifest: String::new(),
        }
    }

    #[test]
    fn upgrades_start_from_the_deployed_revision() {
        let current = |statuses: &[&str]| {
            let h: Vec<Release> = statuses
                .iter()
                .enumerate()
                .map(|(i, s)| rev(i as i64 + 1, s))
                .collect();
            current_release(&h, h.last()).map(|r| r.version)
        };
        assert_eq!(current(&["superseded", "deployed"]), Some(2));
        assert_eq!(current(&["deployed", "failed"]), Some(1));
        assert_eq!(current(&["deployed", "failed", "failed"]), Some(1));
        // No deployed revision: Helm upgrades from (and supersedes) a failed last one.
        assert_eq!(current(&["failed"]), Some(1));
        assert_eq!(current(&[]), None);
    }
}
