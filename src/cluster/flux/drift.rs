//! What Read compares: the managed objects against their fingerprints, the FluxInstance, the
//! operator (Deployment and Helm release). Objects Flux has adopted are never drift. The round
//! trips run concurrently; any API error is an error (never "gone").

use futures::future::try_join_all;
use serde_json::Value as Json;

use super::managed::{Tracked, fingerprint};
use super::manifest::ObjectRef;
use super::objects::{self, configmaps, deployments, secrets};
use super::ownership::adopted_by_flux;
use super::{FluxError, Kube, OPERATOR_RELEASE, instance};
use crate::cluster::helm::release::{ReleaseStatus, current_release};

/// One drifted object: `Kind/namespace/name: deleted|changed|failed`.
pub fn entry(object: &str, how: &str) -> String {
    format!("{object}: {how}")
}

async fn managed_one(
    kube: &Kube,
    tracked: &Tracked,
    salt: &[u8],
) -> Result<Option<String>, FluxError> {
    let Some(reference) = ObjectRef::parse(&tracked.object) else {
        return Ok(None);
    };
    let resource = match reference.kind.as_str() {
        "Secret" => secrets(),
        "ConfigMap" => configmaps(),
        _ => return Ok(None),
    };
    let api = objects::api(kube, &resource, Some(&reference.namespace));
    Ok(
        match objects::get(kube, &api, &reference.name, &tracked.object).await? {
            None => Some(entry(&tracked.object, "deleted")),
            Some(live) if adopted_by_flux(&live) => None,
            Some(live) if fingerprint(salt, &live, &tracked.keys) != tracked.fingerprint => {
                Some(entry(&tracked.object, "changed"))
            }
            Some(_) => None,
        },
    )
}

/// Drift of the managed Secrets and runtime-info ConfigMap.
pub async fn managed(
    kube: &Kube,
    tracked: &[Tracked],
    salt: &[u8],
) -> Result<Vec<String>, FluxError> {
    let found = try_join_all(tracked.iter().map(|t| managed_one(kube, t, salt))).await?;
    Ok(found.into_iter().flatten().collect())
}

/// Drift of the FluxInstance: gone.
pub async fn flux_instance(
    kube: &Kube,
    namespace: &str,
    name: &str,
) -> Result<Vec<String>, FluxError> {
    Ok(
        match instance::read_instance(kube, namespace, name).await? {
            None => vec![entry(
                &format!("FluxInstance/{namespace}/{name}"),
                "deleted",
            )],
            Some(_) => Vec::new(),
        },
    )
}

/// Drift of the operator: its Deployment gone, or its Helm release failed (unless Flux owns it).
pub async fn operator(kube: &Kube, namespace: &str) -> Result<Vec<String>, FluxError> {
    let api = objects::api(kube, &deployments(), Some(namespace));
    let object = format!("Deployment/{namespace}/{OPERATOR_RELEASE}");
    let (deployment, release) = futures::join!(
        objects::get(kube, &api, OPERATOR_RELEASE, &object),
        current_release(
            kube.client.clone(),
            &kube.endpoint,
            namespace,
            OPERATOR_RELEASE
        ),
    );
    let deployment: Option<Json> = deployment?;
    if deployment.as_ref().is_some_and(adopted_by_flux) {
        return Ok(Vec::new());
    }
    let release = release.map_err(|source| FluxError::Cluster {
        step: format!("read the Helm release {namespace}/{OPERATOR_RELEASE}"),
        source,
    })?;
    let mut out = Vec::new();
    if deployment.is_none() {
        out.push(entry(&object, "deleted"));
    }
    match release {
        None => out.push(entry(
            &format!("Release/{namespace}/{OPERATOR_RELEASE}"),
            "deleted",
        )),
        Some(r) if r.status != ReleaseStatus::Deployed => out.push(entry(
            &format!("Release/{namespace}/{OPERATOR_RELEASE}"),
            r.status.as_str(),
        )),
        Some(_) => {}
    }
    Ok(out)
}
