//! `cilium` (cilium-cli): `install`/`upgrade` run Helm in-process (release `cilium` in
//! `kube-system`, chart version from `--version`, values from `--set`/`--set-string`/`--values`; cilium-cli's
//! flags, cobra-parsed: unknown flags such as the classic mode's `--helm-set` fail),
//! `uninstall`, `status [--wait] [--wait-duration D]`, `version`. `status --wait` waits like
//! cilium-cli: the DaemonSets `cilium` and `cilium-envoy` desired == ready == updated, the
//! Deployments `cilium-operator`, `hubble-relay`, `hubble-ui` and `clustermesh-apiserver` ready
//! and updated replicas as asked, all at their latest generation; a component other than the
//! agent that does not exist is disabled, not an error. `Error: ...` goes to stderr.

use std::time::{Duration, Instant};

use super::flags::{self, Flag};
use super::helm::{self, Args};
use super::{Exit, Program, ProgramContext, ProgramFuture};
use crate::cluster::obj;

/// See the module docs.
pub struct CiliumCli;

const DEFAULT_VERSION: &str = "1.18.4";

impl Program for CiliumCli {
    fn run(&self, ctx: ProgramContext) -> ProgramFuture {
        Box::pin(async move {
            match run(&ctx).await {
                Ok(()) => Exit::ok(),
                Err(message) => {
                    ctx.err(&format!("Error: {message}"));
                    Exit::code(1)
                }
            }
        })
    }
}

/// cilium-cli's persistent flags.
const GLOBAL: &[Flag] = &[
    flags::value("context"),
    flags::value("helm-release-name"),
    flags::value("kubeconfig"),
    flags::value("namespace").short('n'),
    flags::value("as"),
    flags::value("as-group"),
    flags::boolean("help").short('h'),
];

/// Flags of `install` and `upgrade` (cilium-cli v0.18, Helm mode).
const INSTALL_UPGRADE: &[Flag] = &[
    flags::value("chart-directory"),
    flags::value("datapath-mode"),
    flags::boolean("dry-run"),
    flags::boolean("dry-run-helm-values"),
    flags::boolean("list-versions"),
    flags::boolean("nodes-without-cilium"),
    flags::value("repository"),
    flags::boolean("reset-values"),
    flags::boolean("reuse-values"),
    flags::boolean("reset-then-reuse-values"),
    flags::value("set"),
    flags::value("set-file"),
    flags::value("set-json"),
    flags::value("set-string"),
    flags::value("values").short('f'),
    flags::value("version"),
    flags::boolean("wait"),
    flags::value("wait-duration"),
    flags::value("history-max"),
];

const UNINSTALL: &[Flag] = &[
    flags::value("chart-directory"),
    flags::value("test-namespace"),
    flags::value("timeout"),
    flags::boolean("wait"),
];

const STATUS: &[Flag] = &[
    flags::boolean("ignore-warnings"),
    flags::boolean("interactive"),
    flags::value("output").short('o'),
    flags::boolean("verbose"),
    flags::boolean("wait"),
    flags::value("wait-duration"),
    flags::value("worker-count"),
];

const VERSION: &[Flag] = &[flags::boolean("client")];

/// (command, helm arguments, `--wait-duration`); errors worded like cilium-cli (cobra).
fn parse(argv: &[String]) -> Result<(String, Args, Option<Duration>), String> {
    let cmd = flags::command(GLOBAL, argv)
        .map(|(_, c)| c)
        .unwrap_or_default();
    let own: &[Flag] = match cmd.as_str() {
        "install" | "upgrade" => INSTALL_UPGRADE,
        "uninstall" => UNINSTALL,
        "status" => STATUS,
        "version" => VERSION,
        "" => &[],
        other => return Err(format!("unknown command \"{other}\" for \"cilium\"")),
    };
    let known: Vec<Flag> = GLOBAL.iter().chain(own).copied().collect();
    let mut p = flags::parse(&known, argv).map_err(|e| e.to_string())?;
    let wait_duration = match p.get("wait-duration") {
        Some(d) => Some(helm::parse_duration(d).ok_or_else(|| {
            format!("invalid argument \"{d}\" for \"--wait-duration\" flag: time: invalid duration \"{d}\"")
        })?),
        None => None,
    };
    for (k, _) in p.flags.iter_mut() {
        *k = match *k {
            "wait-duration" | "timeout" => "cilium-duration",
            other => other,
        };
    }
    let mut args = Args::from_parsed(p)?;
    if !args.positional.is_empty() {
        args.positional.remove(0);
    }
    args.quiet = true;
    Ok((cmd, args, wait_duration))
}

async fn run(ctx: &ProgramContext) -> Result<(), String> {
    let (cmd, mut args, wait_duration) = parse(&ctx.argv[1..])?;
    if cmd == "version" {
        ctx.out("cilium-cli: v0.18.7 compiled with go1.24.6 on linux/amd64");
        ctx.out(&format!("cilium image (default): v{DEFAULT_VERSION}"));
        return Ok(());
    }
    let verb = match cmd.as_str() {
        "install" => "install",
        "upgrade" => "upgrade",
        "uninstall" => "uninstall",
        "status" => "determine status",
        other => return Err(format!("unknown command \"{other}\" for \"cilium\"")),
    };
    let ns = args
        .namespace
        .clone()
        .unwrap_or_else(|| "kube-system".into());
    if let Err(e) = ctx.dial_api().await {
        return Err(format!(
            "Unable to {verb} Cilium: Kubernetes cluster unreachable: Get \"{}/version\": {e}",
            ctx.endpoint().url()
        ));
    }
    match cmd.as_str() {
        "install" | "upgrade" => {
            let version = args
                .version
                .clone()
                .unwrap_or_else(|| DEFAULT_VERSION.into());
            ctx.out(&format!(
                "ℹ️  Using Cilium version {}",
                version.trim_start_matches('v')
            ));
            ctx.out("🔮 Auto-detected cluster name: default");
            let kube_proxy = ctx
                .store
                .get(&obj::daemonsets(), "kube-system", "kube-proxy")
                .is_ok();
            if !kube_proxy {
                ctx.out("🔮 Auto-detected kube-proxy has not been installed");
            }
            args.version = Some(version);
            args.positional = vec![String::new(), "cilium".into(), "cilium".into()];
            args.install = cmd == "upgrade";
            let wait = args.wait;
            helm::install_or_upgrade(ctx, &args, cmd == "install", &ns, "cilium")
                .await
                .map_err(|e| format!("Unable to {verb} Cilium: {e}"))?;
            if wait {
                wait_ready(ctx, &ns, wait_duration).await?;
            }
            Ok(())
        }
        "uninstall" => {
            helm::uninstall(ctx, &args, &ns, "cilium")
                .map_err(|e| format!("Unable to uninstall Cilium: {e}"))?;
            ctx.out("✅ Cilium was successfully uninstalled.");
            Ok(())
        }
        _ => {
            if args.wait {
                wait_ready(ctx, &ns, wait_duration).await?;
            }
            print_status(ctx, &ns);
            Ok(())
        }
    }
}

/// The components `cilium status` judges, in its order: (name, is a DaemonSet, its status line).
const COMPONENTS: &[(&str, bool, &str)] = &[
    ("cilium", true, "Cilium"),
    ("cilium-operator", false, "Operator"),
    ("cilium-envoy", true, "Envoy DaemonSet"),
    ("hubble-relay", false, "Hubble Relay"),
    ("clustermesh-apiserver", false, "ClusterMesh"),
];

/// `None`: the component does not exist (disabled); else whether it is fully rolled out.
fn component_ready(ctx: &ProgramContext, ns: &str, name: &str, daemonset: bool) -> Option<bool> {
    let gr = if daemonset {
        obj::daemonsets()
    } else {
        obj::deployments()
    };
    let o = ctx.store.get(&gr, ns, name).ok()?;
    let observed =
        obj::i64_at(&o, "/status/observedGeneration") == obj::i64_at(&o, "/metadata/generation");
    Some(if daemonset {
        let desired = obj::i64_at(&o, "/status/desiredNumberScheduled").unwrap_or(0);
        observed
            && desired > 0
            && obj::i64_at(&o, "/status/numberReady") == Some(desired)
            && obj::i64_at(&o, "/status/updatedNumberScheduled") == Some(desired)
    } else {
        let want = obj::i64_at(&o, "/spec/replicas").unwrap_or(1);
        observed
            && obj::i64_at(&o, "/status/readyReplicas").unwrap_or(0) == want
            && obj::i64_at(&o, "/status/updatedReplicas").unwrap_or(0) == want
    })
}

/// Whether the agent exists and every component that exists is fully rolled out (`hubble-ui`
/// included, which `cilium status` lists without a status line of its own).
pub fn cilium_ready(ctx: &ProgramContext, ns: &str) -> bool {
    component_ready(ctx, ns, "cilium", true) == Some(true)
        && COMPONENTS
            .iter()
            .map(|(name, ds, _)| (*name, *ds))
            .chain([("hubble-ui", false)])
            .all(|(name, ds)| component_ready(ctx, ns, name, ds) != Some(false))
}

async fn wait_ready(
    ctx: &ProgramContext,
    ns: &str,
    wait_duration: Option<Duration>,
) -> Result<(), String> {
    let timeout = ctx
        .config
        .pace
        .scale(wait_duration.unwrap_or(Duration::from_secs(300)));
    let start = Instant::now();
    while !cilium_ready(ctx, ns) {
        if start.elapsed() >= timeout {
            print_status(ctx, ns);
            return Err("Unable to determine status:  timeout while waiting for status to become successful: context deadline exceeded".into());
        }
        ctx.sleep(Duration::from_secs(2)).await;
    }
    Ok(())
}

fn print_status(ctx: &ProgramContext, ns: &str) {
    let logo = [
        "    /¯¯\\",
        " /¯¯\\__/¯¯\\",
        " \\__/¯¯\\__/",
        " /¯¯\\__/¯¯\\",
        " \\__/¯¯\\__/",
        "    \\__/   ",
    ];
    ctx.out(logo[0]);
    for (i, (name, ds, title)) in COMPONENTS.iter().enumerate() {
        let state = match component_ready(ctx, ns, name, *ds) {
            None => "disabled",
            Some(true) => "OK",
            Some(false) => "1 errors",
        };
        let title = format!("{title}:");
        ctx.out(&format!("{:<14}    {title:<20}{state}", logo[i + 1]));
    }
    ctx.out("");
    for (name, ds, _) in COMPONENTS.iter().chain([("hubble-ui", false, "")].iter()) {
        let gr = if *ds {
            obj::daemonsets()
        } else {
            obj::deployments()
        };
        let Ok(o) = ctx.store.get(&gr, ns, name) else {
            continue;
        };
        let n = |p: &str| obj::i64_at(&o, p).unwrap_or(0);
        let line = if *ds {
            let desired = n("/status/desiredNumberScheduled");
            format!(
                "DaemonSet              {name:<25}Desired: {desired}, Ready: {}/{desired}, Available: {}/{desired}",
                n("/status/numberReady"),
                n("/status/numberAvailable")
            )
        } else {
            let want = n("/spec/replicas");
            format!(
                "Deployment             {name:<25}Desired: {want}, Ready: {}/{want}, Available: {}/{want}",
                n("/status/readyReplicas"),
                n("/status/availableReplicas")
            )
        };
        ctx.out(&line);
    }
}
