//! Long-running programs: the Cilium agent image (agent and init containers), the Cilium
//! operator, Envoy, Hubble relay and UI, the cluster-mesh API server, kube-proxy, Flux's
//! controllers and `pause`. Those that talk to the API connect to the endpoint from their
//! environment first; unreachable → they log the Go error and exit 1 (CrashLoopBackOff).
//!
//! Talos specifics of the agent image: the `mount-cgroup` init container (rendered unless
//! `cgroup.autoMount.enabled=false`) fails with `cilium-mount: Permission denied`; requesting
//! `SYS_MODULE` is refused by the runtime before any program runs (see the kubelet).

use std::time::Duration;

use super::{Exit, Program, ProgramContext, ProgramFuture, basename};

/// Runs until killed.
pub struct Pause;

impl Program for Pause {
    fn run(&self, _ctx: ProgramContext) -> ProgramFuture {
        Box::pin(std::future::pending())
    }
}

fn version_url(ctx: &ProgramContext) -> String {
    format!("{}/version", ctx.endpoint().url())
}

/// Connects, reports Ready, runs forever; logs `started` first.
async fn serve(ctx: &ProgramContext, started: &str) -> Exit {
    ctx.set_ready(true);
    ctx.out(started);
    std::future::pending().await
}

/// A component that reports Ready once started and runs until killed, logging `started` first;
/// with `needs_api`, only after reaching the API endpoint of its environment (unreachable: the
/// Go client's error, exit 1). Envoy, Hubble relay (it talks to the agents, not the API), Hubble
/// UI's frontend and backend, the cluster-mesh API server's containers, kube-proxy.
pub struct Component {
    pub started: &'static str,
    pub needs_api: bool,
}

impl Program for Component {
    fn run(&self, ctx: ProgramContext) -> ProgramFuture {
        let (started, needs_api) = (self.started, self.needs_api);
        Box::pin(async move {
            if needs_api {
                if let Err(e) = ctx.dial_api().await {
                    ctx.out(&format!("level=error msg=\"Unable to contact k8s api-server\" error=\"Get \\\"{}\\\": {e}\"", version_url(&ctx)));
                    return Exit::code(1);
                }
            }
            serve(&ctx, started).await
        })
    }
}

/// Everything run from the `quay.io/cilium/clustermesh-apiserver` image: the `etcd-init` init
/// container (`clustermesh-apiserver etcdinit`) completes; `etcd` and the API server serve.
pub struct ClusterMeshImage;

impl Program for ClusterMeshImage {
    fn run(&self, ctx: ProgramContext) -> ProgramFuture {
        Box::pin(async move {
            if ctx.argv.get(1).map(String::as_str) == Some("etcdinit") {
                ctx.out("level=info msg=\"etcd initialized\" subsys=etcdinit");
                return Exit::ok();
            }
            serve(
                &ctx,
                "level=info msg=\"Started clustermesh-apiserver\" subsys=clustermesh-apiserver",
            )
            .await
        })
    }
}

/// A Flux controller (`source-controller`, `kustomize-controller`, ...).
pub struct Controller;

impl Program for Controller {
    fn run(&self, ctx: ProgramContext) -> ProgramFuture {
        Box::pin(async move {
            if let Err(e) = ctx.dial_api().await {
                ctx.out(&format!("{{\"level\":\"error\",\"msg\":\"unable to create manager\",\"error\":\"Get \\\"{}\\\": {e}\"}}", version_url(&ctx)));
                return Exit::code(1);
            }
            serve(&ctx, "{\"level\":\"info\",\"msg\":\"starting manager\"}").await
        })
    }
}

/// `cilium-operator-generic`.
pub struct CiliumOperator;

impl Program for CiliumOperator {
    fn run(&self, ctx: ProgramContext) -> ProgramFuture {
        Box::pin(async move {
            ctx.out("level=info msg=\"Cilium Operator\" subsys=cilium-operator-generic");
            if let Err(e) = ctx.dial_api().await {
                ctx.out(&format!("level=error msg=\"Unable to contact k8s api-server\" error=\"Get \\\"{}\\\": {e}\" ipAddr=\"{}\" subsys=k8s-client", version_url(&ctx), ctx.endpoint().url()));
                ctx.out(&format!("level=fatal msg=\"Unable to create k8s client\" error=\"{e}\" subsys=cilium-operator-generic"));
                return Exit::code(1);
            }
            serve(&ctx, "level=info msg=\"Leading the operator HA deployment\" subsys=cilium-operator-generic").await
        })
    }
}

/// Everything run from the `quay.io/cilium/cilium` image, by container name.
pub struct CiliumAgentImage;

impl Program for CiliumAgentImage {
    fn run(&self, ctx: ProgramContext) -> ProgramFuture {
        Box::pin(async move {
            let argv0 = ctx
                .argv
                .first()
                .map(|a| basename(a).to_string())
                .unwrap_or_default();
            match (ctx.container_name(), argv0.as_str()) {
                (_, "cilium-agent") => agent(&ctx).await,
                ("mount-cgroup", _) => {
                    ctx.sleep(Duration::from_millis(200)).await;
                    ctx.out(
                        "nsenter: failed to execute /opt/cni/bin/cilium-mount: Permission denied",
                    );
                    Exit::code(126)
                }
                ("config", _) => {
                    ctx.out("level=info msg=\"Running\" subsys=build-config");
                    Exit::ok()
                }
                ("install-cni-binaries", _) => {
                    ctx.out("Installing cilium-cni to /host/opt/cni/bin/ ...");
                    Exit::ok()
                }
                _ => {
                    ctx.sleep(Duration::from_millis(100)).await;
                    Exit::ok()
                }
            }
        })
    }
}

async fn agent(ctx: &ProgramContext) -> Exit {
    let image = ctx
        .container
        .get("image")
        .and_then(|i| i.as_str())
        .unwrap_or("");
    let version = image.rsplit(':').next().unwrap_or("");
    ctx.out(&format!("level=info msg=\"  --k8s-api-server=''\" subsys=daemon\nlevel=info msg=\"Cilium {version}\" subsys=daemon"));
    ctx.out(&format!(
        "level=info msg=\"Establishing connection to apiserver\" host=\"{}\" subsys=k8s-client",
        ctx.endpoint().url()
    ));
    if let Err(e) = ctx.dial_api().await {
        ctx.out(&format!(
            "level=info msg=\"Establishing connection to apiserver\" host=\"{}\" subsys=k8s-client",
            ctx.endpoint().url()
        ));
        ctx.out(&format!("level=error msg=\"Unable to contact k8s api-server\" error=\"Get \\\"{}\\\": {e}\" ipAddr=\"{}\" subsys=k8s-client", version_url(ctx), ctx.endpoint().url()));
        ctx.out(&format!("level=fatal msg=\"failed to start: unable to create k8s client: unable to create k8s client: {e}\" subsys=daemon"));
        return Exit::code(1);
    }
    ctx.out("level=info msg=\"Connected to apiserver\" subsys=k8s-client");
    ctx.sleep(Duration::from_secs(1)).await;
    serve(
        ctx,
        "level=info msg=\"Daemon initialization completed\" subsys=daemon",
    )
    .await
}
