//! The schema: the module's variables as nested attributes (`name = { ... }`, exactly as module
//! arguments are written), plus `deletion_policy`, `rbac`, `sync`, `suspend_applications` and the
//! write-only `cluster` (a fleet in one root), and the computed `id`, `namespace`,
//! `managed_resources_hash`, `cluster_identity` and `drift`.

use crate::framework::{Attribute, Block, Nesting, Schema};
use crate::resources::connection;
use crate::resources::job::{self, Flavor};
use crate::values::Type;

fn strings() -> Type {
    Type::map(Type::String)
}

fn nested(name: &str, doc: &str, attributes: Vec<Attribute>) -> Attribute {
    Attribute::optional(name, Type::Dynamic, doc).nested(Nesting::Single, attributes)
}

#[rustfmt::skip] // one attribute a line, as in `schema()`
fn gitops_resources() -> Attribute {
    let adoption = nested(
        "flux_adoption_check",
        "Install or upgrade the chart until this object carries a Flux ownership label; without it the chart is installed only when its release is absent.",
        vec![
            Attribute::required("resource", Type::String, "Resource (plural), e.g. `deployments`."),
            Attribute::optional("api_group", Type::String, "API group, e.g. `apps`; empty for core."),
            Attribute::required("name", Type::String, "Object name."),
            Attribute::required("namespace", Type::String, "Object namespace."),
        ],
    );
    let chart = vec![
        Attribute::required("name", Type::String, "Release name."),
        Attribute::required("repository", Type::String, "OCI chart path, e.g. `ghcr.io/org/charts/name`."),
        Attribute::required("namespace", Type::String, "Release namespace."),
        Attribute::optional("version", Type::String, "Chart version; latest when unset. An operator installs only the Flux versions embedded in its image (the chart has the operator's version): Flux 2.7 needs 0.30.0 or later, 2.8 needs 0.42.0, 2.9 needs 0.53.0; a chart too old for the FluxInstance's `spec.distribution.version` is a plan error. The chart enables its web UI (port 9080, no authentication) by default: set `web.enabled: false` in `values_yaml` when the operator runs on the host network."),
        Attribute::optional("create_namespace", Type::Bool, "Create the namespace (with `common_metadata`). Default `true`."),
        Attribute::optional("values_yaml", Type::String, "Chart values (YAML); `${var}` runtime variables are substituted."),
        adoption,
    ];
    let prerequisites = nested(
        "prerequisites",
        "Applied before the operator, each until Flux adopts it.",
        vec![
            Attribute::optional("yamls", Type::list(Type::String), "Multi-document manifests, applied until they carry a Flux ownership label (`kustomize.toolkit.fluxcd.io/name` or `helm.toolkit.fluxcd.io/name`)."),
            Attribute::optional("charts", Type::Dynamic, "Helm charts installed in the pre-CNI bootstrap Job.")
            .nested(Nesting::List, chart),
        ],
    );
    let operator = nested(
        "operator_chart",
        "The Flux Operator chart, installed in the pre-CNI bootstrap Job until its `flux-operator` Deployment carries a Flux label.",
        vec![
            Attribute::optional("repository", Type::String, "OCI chart path. Default `ghcr.io/controlplaneio-fluxcd/charts/flux-operator`."),
            Attribute::optional("version", Type::String, "Chart version; latest when unset. An operator installs only the Flux versions embedded in its image (the chart has the operator's version): Flux 2.7 needs 0.30.0 or later, 2.8 needs 0.42.0, 2.9 needs 0.53.0; a chart too old for the FluxInstance's `spec.distribution.version` is a plan error. The chart enables its web UI (port 9080, no authentication) by default: set `web.enabled: false` in `values_yaml` when the operator runs on the host network."),
            Attribute::optional("values_yaml", Type::String, "Chart values (YAML); `${var}` runtime variables are substituted."),
        ],
    );
    Attribute::required("gitops_resources", Type::Dynamic, "What Flux owns after the bootstrap: created if missing, never touched once Flux has adopted it.")
        .updates()
        .nested(
            Nesting::Single,
            vec![
                Attribute::required("instance_yaml", Type::String, "One `fluxcd.controlplane.io/v1` FluxInstance named `flux`, with its namespace (e.g. `flux-system`): the Flux Operator reconciles only the FluxInstance `flux` in the namespace it runs in, and this resource installs it in that namespace. Another name is a plan error (checked after `${var}` substitution once the variables are known). The CRD requires `spec.distribution.version` and `registry`, and with a `spec.sync` its `kind`, `url`, `ref` and `path`; `spec.sync.interval` defaults to `1m`."),
                prerequisites,
                operator,
            ],
        )
}

#[rustfmt::skip] // one attribute a line, as in `schema()`
fn managed_resources() -> Attribute {
    let wo = |a: Attribute| a.sensitive().write_only();
    let runtime_info = wo(nested(
        "runtime_info",
        "ConfigMap `flux-runtime-info` in the FluxInstance's namespace; its `data` are also the `${var}` variables substituted into `instance_yaml`, the prerequisite manifests and the chart values as the module's `flux envsubst --strict` does: over the text, so `replicas: ${n}` is a number and `\"${n}\"` a string; `${var:-default}`, `$${var}` for a literal, `$var` left alone, an unset variable is an error (in comments too). A value that would change the YAML around its placeholder (a newline, `: ` or `#` in a plain scalar, a quote in a quoted one) is kept as the string it says, where `flux envsubst` would make invalid YAML or other objects.",
        vec![
            wo(Attribute::required("data", strings(), "Variables.")),
            wo(Attribute::optional("labels", strings(), "Labels of the ConfigMap.")),
            wo(Attribute::optional("annotations", strings(), "Annotations of the ConfigMap.")),
        ],
    ));
    wo(nested(
        "managed_resources",
        "Applied on every run and kept in sync (server-side apply, field manager `flux-operator-bootstrap`): **write-only**, never stored in state or plan files (Terraform/OpenTofu 1.11+). A salted hash in `managed_resources_hash` makes a changed value plan an update; an object removed from the input is deleted.",
        vec![
            wo(Attribute::optional("secrets_yaml", Type::String, "Multi-document `v1` Secrets, in the FluxInstance's namespace (or without a namespace).")),
            runtime_info,
        ],
    ))
}

#[rustfmt::skip] // one attribute a line, as in `schema()`
fn sync() -> Attribute {
    nested(
        "sync",
        "Per-cluster Git source, set where Git reconciliation cannot revert it: applied to the FluxInstance's `spec.sync` while the bootstrap owns it, and exported into `flux-runtime-info` as `FLUX_SYNC_KIND`, `FLUX_SYNC_URL`, `FLUX_SYNC_REF`, `FLUX_SYNC_PATH`, `FLUX_SYNC_PULL_SECRET` for the manifests in Git to substitute. A rebuild from a Git backup is: change `url` and apply.",
        vec![
            Attribute::optional("kind", Type::String, "`GitRepository` (default), `OCIRepository` or `Bucket`."),
            Attribute::required("url", Type::String, "Source URL."),
            Attribute::optional("ref", Type::String, "Git ref, e.g. `refs/heads/main`."),
            Attribute::optional("path", Type::String, "Path of the cluster in the source, e.g. `kubernetes/clusters/prod`."),
            Attribute::optional("pull_secret", Type::String, "Secret (in the FluxInstance's namespace) with the source credentials."),
        ],
    )
}

pub fn schema() -> Schema {
    let computed = |name, ty, doc| Attribute::computed(name, ty, doc);
    Schema::new(
        job::SCHEMA_VERSION,
        Block::new(
            "Bootstraps the Flux Operator and a FluxInstance the way the `flux-operator-bootstrap` module does (same arguments: replace the `module \"flux_operator_bootstrap\"` block by this resource), natively: chart installs run in a pre-CNI Job, everything else goes through the Kubernetes API. Drift of what the bootstrap owns (managed Secrets, runtime info, the FluxInstance, the operator) shows on plan without a `revision` bump; objects Flux has adopted are never touched.\n\nRun once: when Flux is healthy and owns everything, the resource can go. Remove it and apply (with `deletion_policy = \"keep\"`, the default, destroy deletes only the bootstrap namespace: Flux keeps running), or forget it without touching the cluster with a `removed` block that names it in `from` and holds `lifecycle { destroy = false }`. Afterwards nothing reconciles the managed Secrets from OpenTofu/Terraform any more.",
            vec![
                computed("id", Type::String, "The FluxInstance's namespace."),
                computed("namespace", Type::String, "The FluxInstance's namespace; changing it replaces the resource.").requires_replace(),
                gitops_resources(),
                managed_resources(),
                computed("managed_resources_hash", Type::String, "Salted SHA-256 of `managed_resources`: changes when they do, reveals nothing."),
                Attribute::optional("bootstrap_namespace", Type::String, "Namespace of the bootstrap's own objects (inventory, Jobs). Default `flux-operator-bootstrap`; it gets the `privileged` Pod Security level (never the FluxInstance's namespace). One that exists without a `pod-security.kubernetes.io/enforce` label (the module created it without one) is labelled `privileged` at apply before any host-network Job, and the plan says so when the cluster is reachable; one whose label was set to another level is left as it is, and the apply stops before the Job, naming the label.").requires_replace().updates(),
                nested(
                    "common_metadata",
                    "Labels and annotations of the namespaces the bootstrap creates, present at creation (admission policies read them), until Flux adopts a namespace.",
                    vec![
                        Attribute::optional("labels", strings(), "Labels."),
                        Attribute::optional("annotations", strings(), "Annotations."),
                    ],
                ),
                job::attribute(Flavor::Module),
                Attribute::required("revision", Type::Number, "Bump to run the whole bootstrap again (drift is repaired without it).").updates(),
                Attribute::optional("timeout", Type::String, "Budget of one run (chart installs and the FluxInstance wait): a Go duration, e.g. `10m` (default) or `1h30m`, or seconds (`600`). The Flux Operator reports a failing sync source only after its own health-check wait (5 minutes unless the FluxInstance's annotation `fluxcd.controlplane.io/reconcileTimeout` says otherwise); when `timeout` runs out first, the error gives the sync source's own status and the fix."),
                Attribute::optional("debug_on_failure", Type::Bool, "On failure, add the bootstrap Job's log and the FluxInstance's conditions to the error."),
                Attribute::optional("deletion_policy", Type::String, "`keep` (default): destroy removes the bootstrap namespace and leaves Flux running. `uninstall`: also deletes the FluxInstance first, while the operator still runs, and waits until it is gone (the operator's finalizer removes the Flux controllers, CRDs and objects, and keeps the namespace), then the managed objects and the operator (note: a create that failed leaves the resource tainted, and replacing it destroys first, which with `uninstall` removes Flux)."),
                Attribute {
                    // Not computed: as with `deletion_policy`, the default is applied, not planned.
                    computed: false,
                    ..crate::resources::rbac::attribute()
                },
                sync(),
                Attribute::optional("suspend_applications", Type::Bool, "Exported into `flux-runtime-info` as `FLUX_SUSPEND_APPLICATIONS` (`true`/`false`) so a rebuild can start with the applications suspended: `suspend: ${FLUX_SUSPEND_APPLICATIONS:=false}` in their Kustomizations, substituted by the Kustomization that applies them (with the Flux Operator, the FluxInstance's `kustomize.patches` adds `postBuild.substituteFrom` `flux-runtime-info` to the root Kustomization `flux-system`; see `examples/talos-cilium-flux`)."),
                connection::cluster_attribute(),
                connection::identity_attribute(),
                computed("drift", Type::list(Type::String), "What drifted since the last apply, as `Kind/namespace/name: deleted|changed|failed`; empty after an apply."),
            ],
        ),
    )
}
