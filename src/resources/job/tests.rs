//! The one `job` shape: resolution per flavor, the planned defaults, validation paths, and the
//! upgrade of both 0.1.0 shapes to a state the next plan leaves unchanged.

use super::*;
use crate::framework::Resource;
use crate::framework::plan::same_value;
use crate::values::from_json;

fn chart_schema() -> Schema {
    crate::resources::cilium::schema::schema()
}

fn flux_schema() -> Schema {
    crate::resources::flux_bootstrap::FluxBootstrap.schema()
}

fn job_of(json: Json) -> JobInput {
    serde_json::from_value(json).expect("a job")
}

/// The planned `job` for a configuration written as JSON (cty JSON of the whole resource).
fn planned_job(schema: &Schema, config: Json, flavor: Flavor) -> Value {
    let config = from_json(config.to_string().as_bytes(), &schema.value_type()).expect("config");
    let mut planned = config.clone();
    plan_defaults(&mut planned, &config, flavor);
    planned.attr(JOB).cloned().unwrap_or_default()
}

fn upgraded(schema: &Schema, type_name: &str, state: Json, flavor: Flavor) -> Value {
    let req = UpgradeRequest {
        version: 0,
        raw_json: state.to_string().into_bytes(),
    };
    let resp = upgrade_state(schema, type_name, req, flavor);
    assert!(
        !resp.diagnostics.has_errors(),
        "{:?}",
        resp.diagnostics.iter().collect::<Vec<_>>()
    );
    resp.upgraded_state
}

#[test]
fn every_resource_has_the_same_job_shape() {
    let job_type = |s: Schema| {
        s.block
            .attribute(JOB)
            .map(Attribute::value_type)
            .expect("a job attribute")
    };
    let cilium = job_type(chart_schema());
    assert_eq!(
        cilium,
        job_type(crate::resources::helm_release::schema::schema())
    );
    assert_eq!(cilium, job_type(flux_schema()));
    for schema in [chart_schema(), flux_schema()] {
        assert_eq!(schema.version, SCHEMA_VERSION);
    }
}

#[test]
fn chart_resources_keep_the_talos_defaults_under_a_partial_job() {
    let defaults = JobDefaults::default();
    let kubeprism = kubeprism();
    let unset = resolve(None, &defaults, Flavor::Chart, &kubeprism);
    assert!(unset.host_network);
    assert_eq!(unset.api_endpoint.as_ref(), Some(&kubeprism));
    assert_eq!(unset.image, DEFAULT_HELM_IMAGE);
    let toleration = job_of(json!({"tolerations": [{"key": "dedicated", "operator": "Exists"}]}));
    let partial = resolve(Some(&toleration), &defaults, Flavor::Chart, &kubeprism);
    assert!(partial.host_network, "a toleration changes nothing else");
    assert_eq!(partial.api_endpoint.as_ref(), Some(&kubeprism));
    assert_eq!(partial.tolerations.len(), 1);
    // Off the host network, the node's loopback KubePrism is not the pod's.
    let off = job_of(json!({"host_network": false}));
    let pod = resolve(Some(&off), &defaults, Flavor::Chart, &kubeprism);
    assert!(!pod.host_network && pod.api_endpoint.is_none());
    assert_eq!(
        pre_cni_needs(&pod),
        Some("the pod network and the `kubernetes` Service IP")
    );
    let lb = ApiEndpoint::parse("10.0.0.10:6443").expect("endpoint");
    let pod_lb = resolve(Some(&off), &defaults, Flavor::Chart, &lb);
    assert_eq!(pod_lb.api_endpoint.as_ref(), Some(&lb));
    assert_eq!(pre_cni_needs(&pod_lb), Some("the pod network"));
    // The provider's defaults are the fallback image; the job's wins.
    let mirror = JobDefaults {
        image: "mirror.example/helm:4.3.2".into(),
    };
    assert_eq!(
        resolve(None, &mirror, Flavor::Chart, &kubeprism).image,
        mirror.image
    );
    let own = job_of(json!({"image": {"repository": "own/helm:4", "pull_policy": "Always"}}));
    let settings = resolve(Some(&own), &mirror, Flavor::Chart, &kubeprism);
    assert_eq!(settings.image, "own/helm:4");
    assert_eq!(settings.pull_policy.as_deref(), Some("Always"));
}

#[test]
fn the_flux_bootstrap_takes_a_job_as_written_as_the_module_does() {
    let defaults = JobDefaults::default();
    let kubeprism = kubeprism();
    let unset = resolve(None, &defaults, Flavor::Module, &kubeprism);
    assert!(unset.host_network && unset.api_endpoint.is_some());
    assert_eq!(pre_cni_needs(&unset), None);
    let toleration = job_of(json!({"tolerations": [{"key": "dedicated", "operator": "Exists"}]}));
    let partial = resolve(Some(&toleration), &defaults, Flavor::Module, &kubeprism);
    assert!(!partial.host_network && partial.api_endpoint.is_none());
    let seed = job_of(json!({
        "host_network": true,
        "env": {"KUBERNETES_SERVICE_HOST": "localhost", "KUBERNETES_SERVICE_PORT": "7445"},
    }));
    let seeded = resolve(Some(&seed), &defaults, Flavor::Module, &kubeprism);
    assert!(seeded.host_network && seeded.api_endpoint.is_none());
    assert_eq!(pre_cni_needs(&seeded), None);
}

#[test]
fn the_plan_shows_host_network_and_apply_method_of_a_configured_job() {
    let partial = json!({"job": {"tolerations": {"value": [{"key": "a"}], "type": ["tuple", [["object", {"key": "string"}]]]}}});
    let flux = planned_job(&flux_schema(), partial.clone(), Flavor::Module);
    assert_eq!(
        flux.attr("host_network"),
        Some(&Value::Bool(false)),
        "{flux:?}"
    );
    assert_eq!(
        flux.attr("apply_method").and_then(Value::as_str),
        Some("auto")
    );
    let chart = planned_job(&chart_schema(), partial, Flavor::Chart);
    assert_eq!(chart.attr("host_network"), Some(&Value::Bool(true)));
    let explicit = planned_job(
        &flux_schema(),
        json!({"job": {"host_network": true, "apply_method": "csa"}}),
        Flavor::Module,
    );
    assert_eq!(explicit.attr("host_network"), Some(&Value::Bool(true)));
    assert_eq!(
        explicit.attr("apply_method").and_then(Value::as_str),
        Some("csa")
    );
    // No `job`: null whatever the prior state had (the Talos defaults, documented).
    let config = Value::object([(JOB, Value::Null)]);
    let mut planned = Value::object([(JOB, Value::object([("host_network", Value::Bool(false))]))]);
    plan_defaults(&mut planned, &config, Flavor::Module);
    assert_eq!(planned.attr(JOB), Some(&Value::Null));
}

#[test]
fn bad_job_inputs_are_refused_on_their_attribute() {
    let job = job_of(json!({
        "image": {"pull_policy": "Sometimes"},
        "apply_method": "kubectl",
        "tolerations": [{"key": "a", "operator": "Maybe"}, {"key": "b", "seconds": 3}, {"key": "c", "operator": "Exists", "effect": "NoSchedul"}],
        "affinity": "zone-a",
    }));
    let mut d = Diagnostics::new();
    job.validate(&mut d);
    let paths: Vec<String> = d
        .iter()
        .filter_map(|d| d.attribute.as_ref())
        .map(|p| p.describe())
        .collect();
    assert_eq!(
        paths,
        [
            "job.apply_method",
            "job.image.pull_policy",
            "job.tolerations[0]",
            "job.tolerations[1]",
            "job.tolerations[2]",
            "job.affinity",
        ]
    );
    let misspelt = job_of(json!({"affinity": {"nodeAfinity": {}}}));
    let mut d = Diagnostics::new();
    misspelt.validate(&mut d);
    assert!(
        d.iter()
            .any(|d| d.detail.contains("\"nodeAfinity\" is not a field")),
        "{d:?}"
    );
    let not_a_list = job_of(json!({"tolerations": {"key": "a"}}));
    let mut d = Diagnostics::new();
    not_a_list.validate(&mut d);
    assert_eq!(d.iter().count(), 1);
    let fine = job_of(json!({
        "image": {"repository": "mirror/helm:4.3.2", "pull_policy": "IfNotPresent"},
        "apply_method": "ssa",
        "tolerations": [{"key": "a", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 30}],
        "affinity": {"nodeAffinity": {}},
    }));
    let mut d = Diagnostics::new();
    fine.validate(&mut d);
    assert!(d.is_empty(), "{:?}", d.iter().collect::<Vec<_>>());
}

#[test]
fn a_chart_resources_0_1_0_job_upgrades_to_what_the_same_hcl_now_plans() {
    // talosboot_cilium 0.1.0: `image` and `pull_policy` strings, typed tolerations.
    let v0 = json!({
        "id": "kube-system/cilium",
        "name": "cilium",
        "job": {
            "image": "mirror.example/alpine/helm:4.3.2",
            "pull_policy": "IfNotPresent",
            "node_selector": {"node-role.kubernetes.io/control-plane": ""},
            "tolerations": [{"key": "dedicated", "operator": "Exists", "value": null, "effect": "NoSchedule"}],
            "env": {"HTTPS_PROXY": "http://proxy:3128"},
            "annotations": null,
            "apply_method": null,
        },
    });
    let state = upgraded(&chart_schema(), "talosboot_cilium", v0, Flavor::Chart);
    let job = state.attr(JOB).expect("job");
    let image = job.attr("image").expect("image");
    assert_eq!(
        image.attr("repository").and_then(Value::as_str),
        Some("mirror.example/alpine/helm:4.3.2")
    );
    assert_eq!(
        image.attr("pull_policy").and_then(Value::as_str),
        Some("IfNotPresent")
    );
    assert_eq!(
        state.attr("id").and_then(Value::as_str),
        Some("kube-system/cilium")
    );
    // The same inputs in the new shape, as the user now writes them: the plan changes nothing.
    let config = json!({
        "id": "kube-system/cilium",
        "name": "cilium",
        "job": {
            "image": {"repository": "mirror.example/alpine/helm:4.3.2", "pull_policy": "IfNotPresent"},
            "node_selector": {"node-role.kubernetes.io/control-plane": ""},
            "tolerations": {"value": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}], "type": ["tuple", [["object", {"effect": "string", "key": "string", "operator": "string"}]]]},
            "env": {"HTTPS_PROXY": "http://proxy:3128"},
        },
    });
    let planned = planned_job(&chart_schema(), config, Flavor::Chart);
    assert!(
        same_value(Some(job), Some(&planned)),
        "{job:?}\n{planned:?}"
    );
    // helm_release has the same upgrade.
    let helm = crate::resources::helm_release::schema::schema();
    let v0 = json!({"id": "apps/x", "job": {"image": "alpine/helm:3.18.4", "apply_method": "csa"}});
    let state = upgraded(&helm, "talosboot_helm_release", v0, Flavor::Chart);
    let job = state.attr(JOB).expect("job");
    assert_eq!(
        job.attr("apply_method").and_then(Value::as_str),
        Some("csa")
    );
    assert_eq!(job.attr("host_network"), Some(&Value::Bool(true)));
}

#[test]
fn a_flux_bootstraps_0_1_0_job_upgrades_with_the_module_default_shown() {
    let tolerations = json!({"value": [{"key": "dedicated", "operator": "Exists"}], "type": ["tuple", [["object", {"key": "string", "operator": "string"}]]]});
    let v0 = json!({
        "id": "flux-system",
        "revision": 1,
        "job": {
            "image": {"repository": "mirror.example/helm:4.3.2", "pull_policy": null},
            "affinity": null,
            "tolerations": tolerations,
            "host_network": null,
            "env": {"HTTPS_PROXY": "http://proxy:3128"},
        },
    });
    let state = upgraded(
        &flux_schema(),
        "talosboot_flux_bootstrap",
        v0,
        Flavor::Module,
    );
    let job = state.attr(JOB).expect("job");
    assert_eq!(job.attr("host_network"), Some(&Value::Bool(false)));
    // The module's HCL, unchanged, plans the same.
    let config = json!({
        "id": "flux-system",
        "revision": 1,
        "job": {
            "image": {"repository": "mirror.example/helm:4.3.2"},
            "tolerations": tolerations,
            "env": {"HTTPS_PROXY": "http://proxy:3128"},
        },
    });
    let planned = planned_job(&flux_schema(), config, Flavor::Module);
    assert!(
        same_value(Some(job), Some(&planned)),
        "{job:?}\n{planned:?}"
    );
    // Without a job, nothing to rewrite; a current state passes as it is.
    let bare = upgraded(
        &flux_schema(),
        "talosboot_flux_bootstrap",
        json!({"id": "flux-system", "job": null}),
        Flavor::Module,
    );
    assert_eq!(bare.attr(JOB), Some(&Value::Null));
    let current = UpgradeRequest {
        version: SCHEMA_VERSION,
        raw_json: state_json(&state, &flux_schema()),
    };
    let resp = upgrade_state(
        &flux_schema(),
        "talosboot_flux_bootstrap",
        current,
        Flavor::Module,
    );
    assert!(!resp.diagnostics.has_errors());
    assert!(same_value(Some(&resp.upgraded_state), Some(&state)));
}

fn state_json(state: &Value, schema: &Schema) -> Vec<u8> {
    crate::values::to_json(state, &schema.value_type()).expect("encodes")
}
