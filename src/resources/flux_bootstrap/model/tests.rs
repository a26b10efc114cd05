//! Tests of the Flux bootstrap's model: what validation and the plan check in the FluxInstance, the managed Secrets and the chart.

use super::*;
use crate::framework::Severity;

#[test]
fn the_instance_must_be_one_flux_instance_named_flux() {
    let ok = "apiVersion: fluxcd.controlplane.io/v1\nkind: FluxInstance\nmetadata:\n  name: flux\n  namespace: flux-system\n";
    assert_eq!(
        parse_instance(ok).map(|m| m.namespace().to_owned()),
        Ok("flux-system".into())
    );
    let named = ok.replace("name: flux\n", "name: other\n");
    assert!(parse_instance(&named).unwrap_err().contains("named `flux`"));
    let kind = ok.replace("FluxInstance", "Kustomization");
    assert!(parse_instance(&kind).unwrap_err().contains("FluxInstance"));
    assert!(
        parse_instance(&format!("{ok}---\n{ok}"))
            .unwrap_err()
            .contains("exactly one")
    );
    let no_ns = ok.replace("  namespace: flux-system\n", "");
    assert!(parse_instance(&no_ns).unwrap_err().contains("namespace"));
}

#[test]
fn managed_secrets_are_secrets_in_the_instance_namespace() {
    let s = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: flux-system\nstringData:\n  password: hunter2\n";
    let docs = parse_secrets(s, "flux-system").expect("valid");
    assert_eq!(docs[0].namespace(), "flux-system");
    let elsewhere = s.replace("name: flux-system\n", "name: x\n  namespace: default\n");
    let err = parse_secrets(&elsewhere, "flux-system").unwrap_err();
    assert!(
        err.contains("FluxInstance's namespace") && !err.contains("hunter2"),
        "{err}"
    );
    let cm = s.replace("kind: Secret", "kind: ConfigMap");
    assert!(
        parse_secrets(&cm, "flux-system")
            .unwrap_err()
            .contains("only `v1` Secrets")
    );
}

#[test]
fn chart_repositories_are_oci_paths() {
    assert_eq!(
        oci_reference(DEFAULT_OPERATOR_REPOSITORY).as_deref(),
        Ok("oci://ghcr.io/controlplaneio-fluxcd/charts/flux-operator")
    );
    assert!(oci_reference("oci://ghcr.io/x/y").is_ok());
    assert!(oci_reference("https://charts.example.com").is_err());
}

#[test]
fn an_operator_chart_too_old_for_the_distribution_names_the_minimum_chart() {
    let config = |range: &str, chart: Option<&str>| Config {
        gitops_resources: GitopsResources {
            instance_yaml: Maybe::Known(format!(
                "apiVersion: fluxcd.controlplane.io/v1\nkind: FluxInstance\nmetadata:\n  name: flux\n  namespace: flux-system\nspec:\n  distribution:\n    version: \"{range}\"\n    registry: ghcr.io/fluxcd\n"
            )),
            operator_chart: OperatorChart {
                version: chart.map(str::to_owned),
                ..Default::default()
            },
            ..Default::default()
        },
        ..Default::default()
    };
    let mut d = Diagnostics::new();
    config("2.9.x", Some("0.33.0")).validate(&mut d);
    let errors: Vec<_> = d.iter().collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(
        errors[0]
            .attribute
            .as_ref()
            .map(|p| p.describe())
            .as_deref(),
        Some("gitops_resources.operator_chart.version")
    );
    assert!(
        errors[0].detail.contains("chart 0.53.0 or later"),
        "{}",
        errors[0].detail
    );
    assert!(
        errors[0].detail.contains("up to 2.7.3"),
        "{}",
        errors[0].detail
    );
    for fine in [
        config("2.9.x", Some("0.59.0")),
        config("2.9.x", Some("0.53.0")),
        config("2.7.x", Some("0.33.0")),
        config("2.9.x", None),
    ] {
        let mut d = Diagnostics::new();
        fine.validate(&mut d);
        assert!(d.is_empty(), "{:?}", d.iter().collect::<Vec<_>>());
    }
}

const FLUX: &str = "apiVersion: fluxcd.controlplane.io/v1\nkind: FluxInstance\nmetadata:\n  name: @NAME@\n  namespace: @NS@\nspec:\n  distribution:\n    version: \"2.9.x\"\n    registry: ghcr.io/fluxcd\n";

fn with_instance(name: &str, namespace: &str) -> Config {
    let mut c = Config::default();
    c.gitops_resources.instance_yaml =
        Maybe::Known(FLUX.replace("@NS@", namespace).replace("@NAME@", name));
    c
}

fn with_variables(mut c: Config, vars: &[(&str, &str)]) -> Config {
    c.managed_resources = Some(ManagedResources {
        secrets_yaml: None,
        runtime_info: Some(RuntimeInfo {
            data: vars
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            ..Default::default()
        }),
    });
    c
}

/// `(severity, attribute path, summary, detail)` of each diagnostic.
fn found(c: &Config) -> Vec<(Severity, String, String, String)> {
    let mut d = Diagnostics::new();
    c.validate(&mut d);
    d.iter()
        .map(|d| {
            (
                d.severity,
                d.attribute
                    .as_ref()
                    .map(|p| p.describe())
                    .unwrap_or_default(),
                d.summary.clone(),
                d.detail.clone(),
            )
        })
        .collect()
}

/// A case: its name, the configuration, the error's attribute path and words (`None`:
/// accepted).
type Case = (&'static str, Config, Option<(&'static str, &'static str)>);

#[test]
fn a_flux_instance_the_operator_never_reconciles_is_a_plan_error() {
    let instance_yaml = "gitops_resources.instance_yaml";
    let cases: Vec<Case> = vec![
        ("named flux", with_instance("flux", "flux-system"), None),
        (
            "another name",
            with_instance("main", "flux-system"),
            Some((instance_yaml, "Set `metadata.name: flux`")),
        ),
        (
            "a name from a variable, unknown at plan",
            Config {
                unknown_variables: true,
                ..with_variables(with_instance("${NAME}", "flux-system"), &[])
            },
            None,
        ),
        (
            "a name from a known variable",
            with_variables(with_instance("${NAME}", "flux-system"), &[("NAME", "flux")]),
            None,
        ),
        (
            "a name from a known variable that is not flux",
            with_variables(with_instance("${NAME}", "flux-system"), &[("NAME", "prod")]),
            Some((instance_yaml, "not \"prod\"")),
        ),
        (
            "the operator told to watch another namespace",
            {
                let mut c = with_instance("flux", "flux-system");
                c.gitops_resources.operator_chart.values_yaml = Some(
                    "extraEnvs:\n  - name: RUNTIME_NAMESPACE\n    value: flux-operator\n".into(),
                );
                c
            },
            Some((
                "gitops_resources.operator_chart.values_yaml",
                "would never reconcile this one in \"flux-system\"",
            )),
        ),
        (
            "RUNTIME_NAMESPACE set to the FluxInstance's namespace",
            {
                let mut c = with_instance("flux", "flux-system");
                c.gitops_resources.operator_chart.values_yaml = Some(
                    "extraEnvs:\n  - name: RUNTIME_NAMESPACE\n    value: flux-system\n".into(),
                );
                c
            },
            None,
        ),
        (
            "the operator as its web UI only",
            {
                let mut c = with_instance("flux", "flux-system");
                c.gitops_resources.operator_chart.values_yaml =
                    Some("web:\n  serverOnly: true\n".into());
                c
            },
            Some(("gitops_resources.operator_chart.values_yaml", "web UI only")),
        ),
        ("unknown instance_yaml", Config::default(), None),
    ];
    for (case, config, want) in cases {
        let errors: Vec<_> = found(&config)
            .into_iter()
            .filter(|d| d.0 == Severity::Error)
            .collect();
        match want {
            None => assert!(errors.is_empty(), "{case}: {errors:?}"),
            Some((path, words)) => {
                assert_eq!(errors.len(), 1, "{case}: {errors:?}");
                assert_eq!(errors[0].1, path, "{case}");
                assert!(errors[0].3.contains(words), "{case}: {}", errors[0].3);
            }
        }
    }
}

#[test]
fn the_namespace_is_planned_as_apply_resolves_it() {
    assert_eq!(
        with_instance("flux", "flux-system")
            .planned_namespace()
            .as_deref(),
        Some("flux-system")
    );
    let templated = with_variables(with_instance("flux", "${NS}"), &[("NS", "team-flux")]);
    assert_eq!(templated.planned_namespace().as_deref(), Some("team-flux"));
    let unknown = Config {
        unknown_variables: true,
        ..with_variables(with_instance("flux", "${NS}"), &[])
    };
    assert_eq!(
        unknown.planned_namespace(),
        None,
        "never the placeholder itself"
    );
    assert_eq!(Config::default().planned_namespace(), None);
}

#[test]
fn what_the_crd_requires_is_warned_at_plan() {
    let mut c = with_instance("flux", "flux-system");
    c.sync = Some(Sync {
        url: Some("ssh://git@github.com/org/infra.git".into()),
        path: Some("clusters/prod".into()),
        ..Default::default()
    });
    let found = found(&c);
    assert_eq!(found.len(), 1, "{found:?}");
    let (severity, path, _, detail) = &found[0];
    assert_eq!((*severity, path.as_str()), (Severity::Warning, "sync"));
    assert!(
        detail.contains("`spec.sync.ref`") && detail.contains("`ref`"),
        "{detail}"
    );
    c.sync.as_mut().expect("sync").r#ref = Some("refs/heads/main".into());
    assert!(super::tests::found(&c).is_empty());
    let bare = Config {
            gitops_resources: GitopsResources {
                instance_yaml: Maybe::Known("apiVersion: fluxcd.controlplane.io/v1\nkind: FluxInstance\nmetadata:\n  name: flux\n  namespace: flux-system\n".into()),
                ..Default::default()
            },
            ..Default::default()
        };
    let found = super::tests::found(&bare);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, Severity::Warning);
    assert!(
        found[0].3.contains("spec.distribution.version"),
        "{}",
        found[0].3
    );
}
