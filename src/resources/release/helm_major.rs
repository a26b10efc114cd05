//! What the plan says about the Helm major that will run, when an install or upgrade is planned
//! and the cluster answers: a Helm 3 image (named by its tag) on a release whose newest record
//! says `apply_method: ssa` (the apply refuses it unless `job.apply_method = "csa"`), and, for an
//! adoption Helm 4 runs by server-side apply, whose fields it takes. Best-effort: the Job asks
//! the binary for its major at apply and decides again there.

use std::time::Duration;

use super::ChartResource;
use crate::cluster::Kube;
use crate::cluster::helm::adoption;
use crate::cluster::helm::install::{DEFAULT_HELM_IMAGE, before};
use crate::cluster::helm::major::{self, ApplyMethodChoice, HelmMajor, MajorInputs, Refusal};
use crate::cluster::helm::release::ReleaseStatus;
use crate::cluster::helm::release::{HelmRelease, ManifestObject};
use crate::framework::{Diagnostic, Diagnostics};
use crate::resources::job::{JobDefaults, JobInput};
use crate::values::AttributePath;

/// The warning when the image's tag names Helm 3 and that major would be refused on `current`.
pub fn helm3_warning(
    image: &str,
    choice: ApplyMethodChoice,
    release_id: &str,
    current: Option<&HelmRelease>,
) -> Option<(String, String)> {
    if HelmMajor::named_by_image(image) != Some(HelmMajor::V3) {
        return None;
    }
    let inputs = MajorInputs {
        choice,
        ..Default::default()
    };
    let refusal = major::install_flags(HelmMajor::V3, inputs, before(current)).err()?;
    let record = current.map(|r| format!("sh.helm.release.v1.{}.v{}", r.name, r.revision));
    let detail = match refusal {
        Refusal::WouldSwitchToClientSide => format!(
            "The installer image {image} carries Helm 3, and the newest record of release {release_id} ({}) says `apply_method: ssa`: Helm 4 applies this release server-side. Helm 3 applies client-side only; its upgrade would switch the release to client-side apply for good (Helm 3 also rewrites the superseded record without `apply_method`). The apply will refuse to run it. Use a Helm 4 image (the default, `{DEFAULT_HELM_IMAGE}`), or set `job.apply_method = \"csa\"` to make the switch deliberately.",
            record.unwrap_or_default()
        ),
        Refusal::NoServerSideApply => format!(
            "`job.apply_method` is \"ssa\", but the installer image {image} carries Helm 3, which has no server-side apply: the apply will refuse to run it. Use a Helm 4 image (the default, `{DEFAULT_HELM_IMAGE}`)."
        ),
    };
    Some((
        "Helm 3 installer on a server-side release".to_owned(),
        detail,
    ))
}

/// Whether an adoption by this image may run server-side (Helm 4, or an image whose tag does not
/// say), so that it passes `--force-conflicts`.
pub fn adopts_server_side(
    image: &str,
    choice: ApplyMethodChoice,
    current: Option<&HelmRelease>,
) -> bool {
    HelmMajor::named_by_image(image) != Some(HelmMajor::V3)
        && major::helm4_server_side(choice, before(current))
}

/// The objects an adoption takes: the release's manifest when it has a record, else those the
/// resource knows it adopts (Cilium's agent, operator and configuration).
fn adopted_objects<K: ChartResource>(m: &K, current: Option<&HelmRelease>) -> Vec<ManifestObject> {
    if let Some(r) = current.filter(|r| !r.objects.is_empty()) {
        return r.objects.clone();
    }
    m.adoption_candidates()
}

/// Release `namespace/name` as an install finds it (`None`: none, or only an uninstalled
/// record); `Err` when the cluster could not say (the plan then skips its check).
pub async fn current_release(
    kube: &Kube,
    namespace: &str,
    name: &str,
) -> Result<Option<HelmRelease>, ()> {
    crate::cluster::helm::install::release(kube, namespace, name)
        .await
        .map(|r| r.filter(|r| r.status != ReleaseStatus::Uninstalled))
        .map_err(|e| tracing::debug!(error = %e, "plan-time release read skipped"))
}

/// Where the Helm-major warning points.
pub fn image_path() -> AttributePath {
    AttributePath::attr("job")
        .then_attr("image")
        .then_attr("repository")
}

/// The plan's warnings about the Helm major, within `budget`; nothing when the cluster does not
/// answer in time.
pub async fn plan_warnings<K: ChartResource>(
    kube: impl std::future::Future<Output = Option<Kube>>,
    m: &K,
    defaults: &JobDefaults,
    budget: Duration,
) -> Diagnostics {
    let mut diagnostics = Diagnostics::new();
    let c = m.common();
    let image = JobInput::image(c.job.as_ref(), defaults);
    let choice = JobInput::apply_method(c.job.as_ref());
    let adopts = c.adopt_existing == Some(true);
    let (namespace, name) = (c.release_namespace(), c.release_name());
    let id = c.id();
    let found = tokio::time::timeout(budget, async {
        let kube = kube.await?;
        let current = current_release(&kube, namespace, name).await.ok()?;
        let mut found = Vec::new();
        if let Some(w) = helm3_warning(&image, choice, &id, current.as_ref()) {
            found.push((image_path(), w));
        }
        if adopts && adopts_server_side(&image, choice, current.as_ref()) {
            let objects = adopted_objects(m, current.as_ref());
            let managers = adoption::managers_of(&kube, &objects, namespace)
                .await
                .inspect_err(
                    |e| tracing::debug!(error = %e, "plan-time field managers read skipped"),
                )
                .ok()?;
            if let Some(w) = adoption::taken_message(&id, &adoption::taken(&managers)) {
                found.push((AttributePath::attr("adopt_existing"), w));
            }
        }
        Some(found)
    })
    .await;
    for (at, (summary, detail)) in found.ok().flatten().unwrap_or_default() {
        diagnostics.push(Diagnostic::warning(summary, detail).at(at));
    }
    diagnostics
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::helm::major::ApplyMethod;
    use crate::cluster::helm::release::ReleaseStatus;

    fn record(method: Option<ApplyMethod>) -> HelmRelease {
        HelmRelease {
            name: "cilium".into(),
            namespace: "kube-system".into(),
            revision: 4,
            status: ReleaseStatus::Deployed,
            chart: "cilium".into(),
            chart_version: "1.18.4".into(),
            app_version: String::new(),
            last_deployed: String::new(),
            first_deployed: String::new(),
            description: String::new(),
            notes: String::new(),
            values_sha256: String::new(),
            workloads: Vec::new(),
            kinds: Vec::new(),
            objects: Vec::new(),
            apply_method: method,
            upgrade_compatibility: None,
            kube_proxy_replacement: None,
        }
    }

    #[test]
    fn the_plan_warns_when_a_helm_3_image_meets_a_server_side_record() {
        let ssa = record(Some(ApplyMethod::Ssa));
        let auto = ApplyMethodChoice::Auto;
        let (summary, detail) =
            helm3_warning("alpine/helm:3.18.4", auto, "kube-system/cilium", Some(&ssa))
                .expect("warned");
        assert!(summary.contains("Helm 3"));
        assert!(
            detail.contains("alpine/helm:3.18.4")
                && detail.contains("sh.helm.release.v1.cilium.v4")
                && detail.contains("job.apply_method = \"csa\""),
            "{detail}"
        );
        // table: (image, choice, record) -> warned
        let csa = record(Some(ApplyMethod::Csa));
        let helm3 = record(None);
        let table: &[(&str, ApplyMethodChoice, Option<&HelmRelease>, bool)] = &[
            ("alpine/helm:4.3.2", auto, Some(&ssa), false),
            // A digest says nothing at plan; the Job decides.
            ("alpine/helm@sha256:abc", auto, Some(&ssa), false),
            (
                "alpine/helm:3.18.4",
                ApplyMethodChoice::Csa,
                Some(&ssa),
                false,
            ),
            ("alpine/helm:3.18.4", auto, Some(&csa), false),
            ("alpine/helm:3.18.4", auto, Some(&helm3), false),
            ("alpine/helm:3.18.4", auto, None, false),
            ("alpine/helm:3.18.4", ApplyMethodChoice::Ssa, None, true),
        ];
        for (image, choice, current, warned) in table {
            assert_eq!(
                helm3_warning(image, *choice, "ns/x", *current).is_some(),
                *warned,
                "{image} {choice:?} {current:?}"
            );
        }
    }

    #[test]
    fn an_adoption_runs_server_side_with_helm_4_on_an_install_or_a_server_side_record() {
        let auto = ApplyMethodChoice::Auto;
        assert!(adopts_server_side("alpine/helm:4.3.2", auto, None));
        assert!(adopts_server_side("alpine/helm@sha256:abc", auto, None));
        assert!(!adopts_server_side("alpine/helm:3.18.4", auto, None));
        assert!(!adopts_server_side(
            "alpine/helm:4.3.2",
            auto,
            Some(&record(None))
        ));
        assert!(adopts_server_side(
            "alpine/helm:4.3.2",
            auto,
            Some(&record(Some(ApplyMethod::Ssa)))
        ));
        assert!(!adopts_server_side(
            "alpine/helm:4.3.2",
            ApplyMethodChoice::Csa,
            None
        ));
    }
}
