//! Faults owned by the cluster model, in process and over the API.
//!
//! - [`kill_pod`]: a node reboot under a running pod: its running containers end with exit code
//!   137 (reason `Error`), then the pod's `restartPolicy` applies (a Job with `Never` sees a
//!   failed pod). Over the API: change annotation `talos-sim.dev/kill` on the pod, e.g.
//!   `kubectl annotate pod P talos-sim.dev/kill=1 --overwrite`.
//! - Hanging programs: annotation `talos-sim.dev/hang: "true"` on a pod (or a Job's pod
//!   template) makes its containers run without ever exiting, until killed or deleted (e.g. by a
//!   Job's `activeDeadlineSeconds`). [`hang_template`] sets it on a Job/Deployment manifest.
//! - Unreachable sync sources for the Flux Operator: see [`crate::programs::flux_operator`].
//! - Adoption by Flux: [`mark_adopted_by_flux`].

use serde_json::{Value, json};

use super::kubelet::{HANG_ANNOTATION, KILL_ANNOTATION};
use super::obj;
use crate::store::{ApiError, GroupResource, Patch, Store};

/// Kills the running containers of pod `ns/name` (exit code 137), like a node reboot.
/// Errors: 404 when the pod does not exist.
pub fn kill_pod(store: &Store, ns: &str, name: &str) -> Result<(), ApiError> {
    let mark = crate::util::hex(&crate::util::random_bytes::<6>());
    let patch = Patch::Merge(json!({"metadata": {"annotations": {KILL_ANNOTATION: mark}}}));
    store.patch(
        &obj::pods(),
        ns,
        name,
        patch,
        &obj::manager("talos-sim-faults"),
    )?;
    Ok(())
}

/// Adds the hang annotation to a manifest's pod template (`spec.template` for workloads and
/// Jobs, the object itself for a Pod).
pub fn hang_template(manifest: &mut Value) {
    let meta = if manifest.pointer("/spec/template").is_some() {
        &mut manifest["spec"]["template"]["metadata"]
    } else {
        &mut manifest["metadata"]
    };
    if !meta.is_object() {
        *meta = json!({});
    }
    meta["annotations"][HANG_ANNOTATION] = json!("true");
}

/// Marks an object as managed by Flux the way kustomize-controller does: labels
/// `kustomize.toolkit.fluxcd.io/name: flux-system` and `.../namespace: flux-system`.
/// Errors: 404 when the object (or its type) does not exist.
pub fn mark_adopted_by_flux(
    store: &Store,
    gr: &GroupResource,
    ns: &str,
    name: &str,
) -> Result<Value, ApiError> {
    let labels = json!({"kustomize.toolkit.fluxcd.io/name": "flux-system", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"});
    store.patch(
        gr,
        ns,
        name,
        Patch::Merge(json!({"metadata": {"labels": labels}})),
        &obj::manager("kustomize-controller"),
    )
}
