//! Adoption: the module's leftovers (inventory honoured, nothing restarted), import by the
//! FluxInstance's namespace (then `-replace`, which forgets and adopts), and prerequisites
//! applied until Flux adopts them.

use kube::api::PostParams;

use super::*;

on_both_clis!(async module_leftovers_are_adopted_without_restart);
async fn module_leftovers_are_adopted_without_restart() {
    let Some(cluster) = FluxCluster::start().await else {
        return;
    };
    let client = cluster.client().await;
    install_cilium(&client).await;
    let extra = "  timeout = \"2m\"\n";
    // What the module leaves: operator release, FluxInstance, runtime info and its inventory. A
    // first run of the resource stands in for the module's Job; its state is then forgotten.
    let first = Workspace::new(&root(&cluster, extra));
    first.init();
    first.ok(APPLY);
    // The module's inventory also lists the old Gitea key of seed 000, which the input no longer has.
    let secrets = api(&client, SECRET, "secrets", Some("flux-system"));
    let gitea: DynamicObject = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "flux-gitea", "namespace": "flux-system"}, "stringData": {"identity": "old-key"}})).expect("secret");
    secrets
        .create(&PostParams::default(), &gitea)
        .await
        .expect("gitea secret");
    let entries = json!({"data": {"entries": "- ConfigMap/flux-system/flux-runtime-info\n- Secret/flux-system/flux-gitea\n"}});
    configmaps(&client, "flux-operator-bootstrap")
        .patch(
            "inventory",
            &PatchParams::default(),
            &Patch::Merge(&entries),
        )
        .await
        .expect("module inventory");
    let before_fi = get(&instances(&client), "flux").await.expect("fi");
    let operator = api(&client, DEPLOYMENT, "deployments", Some("flux-system"));
    let before_op = get(&operator, "flux-operator").await.expect("operator");

    let second = Workspace::new(&root(&cluster, extra));
    second.init();
    second.ok(APPLY);
    let after_fi = get(&instances(&client), "flux").await.expect("fi");
    let after_op = get(&operator, "flux-operator").await.expect("operator");
    assert_eq!(
        before_fi["metadata"]["uid"], after_fi["metadata"]["uid"],
        "the FluxInstance is adopted, not recreated"
    );
    assert_eq!(
        before_fi["metadata"]["generation"], after_fi["metadata"]["generation"],
        "nothing changed in its spec"
    );
    assert_eq!(before_op["metadata"]["uid"], after_op["metadata"]["uid"]);
    assert_eq!(
        before_op["spec"]["template"], after_op["spec"]["template"],
        "the operator is not restarted"
    );
    assert!(
        get(&secrets, "flux-gitea").await.is_none(),
        "the module's inventory is honoured: the retired Secret is deleted"
    );
    assert_no_changes(&second);
}

on_both_clis!(async import_by_the_flux_instance_namespace);
async fn import_by_the_flux_instance_namespace() {
    let Some(cluster) = FluxCluster::start().await else {
        return;
    };
    let client = cluster.client().await;
    install_cilium(&client).await;
    let extra = "  timeout = \"2m\"\n";
    let first = Workspace::new(&root(&cluster, extra));
    first.init();
    first.ok(APPLY);
    let before = get(&instances(&client), "flux").await.expect("fi");

    let second = Workspace::new(&root(&cluster, extra));
    second.init();
    let missing = second.run(&[
        "import",
        "-no-color",
        "talosboot_flux_bootstrap.flux_operator_bootstrap",
        "elsewhere",
    ]);
    assert!(
        !missing.success && missing.flat().contains("No FluxInstance to import"),
        "{}",
        missing.text()
    );
    second.ok(&[
        "import",
        "-no-color",
        "talosboot_flux_bootstrap.flux_operator_bootstrap",
        "flux-system",
    ]);
    let plan = second.run(&["plan", "-no-color", "-input=false"]);
    assert!(
        plan.stdout.contains("0 to add, 1 to change, 0 to destroy"),
        "an imported bootstrap updates in place:\n{}",
        plan.text()
    );
    second.ok(APPLY);
    let after = get(&instances(&client), "flux").await.expect("fi");
    assert_eq!(before["metadata"]["uid"], after["metadata"]["uid"]);
    assert_no_changes(&second);

    // `-replace` (`keep`, the default: its destroy forgets, its create adopts what runs). The
    // create's plan at apply has no private state left: it must match the plan's.
    let mut replace = APPLY.to_vec();
    replace.push("-replace=talosboot_flux_bootstrap.flux_operator_bootstrap");
    second.ok(&replace);
    let replaced = get(&instances(&client), "flux").await.expect("fi");
    assert_eq!(
        before["metadata"]["uid"], replaced["metadata"]["uid"],
        "adopted, not recreated"
    );
    assert_no_changes(&second);
}

on_both_clis!(async prerequisites_are_applied_until_flux_adopts_them);
async fn prerequisites_are_applied_until_flux_adopts_them() {
    let Some(cluster) = FluxCluster::start().await else {
        return;
    };
    let client = cluster.client().await;
    install_cilium(&client).await;
    let prerequisites = format!(
        "{}\n    {OPERATOR_CHART}",
        r#"prerequisites = {
      yamls = [<<-EOT
        apiVersion: v1
        kind: ConfigMap
        metadata: { name: prereq-a, namespace: default }
        data: { k: v1 }
        ---
        apiVersion: v1
        kind: ConfigMap
        metadata: { name: prereq-b, namespace: default }
        data: { k: v1 }
      EOT
      ]
      charts = [{ name = "extra", repository = "ghcr.io/example/charts/extra", namespace = "extras", version = "0.1.0" }]
    }"#
    );
    let extra = "  timeout = \"2m\"\n  common_metadata = { labels = { team = \"platform\" } }\n";
    let text = root(&cluster, extra).replace(OPERATOR_CHART, &prerequisites);
    let ws = Workspace::new(&text);
    ws.init();
    ws.ok(APPLY);
    let default_cms = configmaps(&client, "default");
    for name in ["prereq-a", "prereq-b"] {
        assert_eq!(
            get(&default_cms, name).await.expect(name)["data"]["k"],
            "v1"
        );
    }
    let namespaces = api(&client, NAMESPACE, "namespaces", None);
    for ns in ["extras", "flux-system", "flux-operator-bootstrap"] {
        let object = get(&namespaces, ns).await.expect(ns);
        assert_eq!(
            object["metadata"]["labels"]["team"], "platform",
            "common_metadata on {ns}"
        );
    }
    let records = api(&client, SECRET, "secrets", Some("extras"));
    assert!(
        get(&records, "sh.helm.release.v1.extra.v1").await.is_some(),
        "the prerequisite chart is installed"
    );
    assert_no_changes(&ws);

    // Not adopted: applied again on the next run. Adopted: never touched again.
    let edit = json!({"data": {"k": "edited"}});
    default_cms
        .patch("prereq-a", &PatchParams::default(), &Patch::Merge(&edit))
        .await
        .expect("edit a");
    let adopt = json!({"metadata": {"labels": {"kustomize.toolkit.fluxcd.io/name": "infra"}}, "data": {"k": "from-git"}});
    default_cms
        .patch("prereq-b", &PatchParams::default(), &Patch::Merge(&adopt))
        .await
        .expect("adopt b");
    ws.write("main.tf", &text.replace("revision = 1", "revision = 2"));
    ws.ok(APPLY);
    assert_eq!(
        get(&default_cms, "prereq-a").await.expect("a")["data"]["k"],
        "v1"
    );
    assert_eq!(
        get(&default_cms, "prereq-b").await.expect("b")["data"]["k"],
        "from-git"
    );
    assert!(
        get(&records, "sh.helm.release.v1.extra.v2").await.is_none(),
        "a chart without adoption check is installed only when absent"
    );
}

on_both_clis!(async runtime_variables_are_typed_as_the_module_substitutes_them);
/// A module root's `port: ${port}` in a prerequisite: substituted over the text as the module's
/// `flux envsubst` does, the port is a number and the Service is created (substituted inside the
/// parsed scalar, it was the string "8080", which the API server refuses).
async fn runtime_variables_are_typed_as_the_module_substitutes_them() {
    let Some(cluster) = FluxCluster::start().await else {
        return;
    };
    let client = cluster.client().await;
    install_cilium(&client).await;
    let prerequisites = format!(
        "{}\n    {OPERATOR_CHART}",
        r#"prerequisites = {
      yamls = [<<-EOT
        apiVersion: v1
        kind: Service
        metadata: { name: $${service}, namespace: default }
        spec:
          ports:
            - port: $${port}
              name: "$${service}-$${port}"
      EOT
      ]
    }"#
    );
    let extra = format!(
        "  timeout = \"2m\"\n  managed_resources = {{ secrets_yaml = {}, runtime_info = {{ data = {{ port = \"8080\", service = \"typed\" }} }} }}\n",
        cluster.deploy_key_secret()
    );
    let text = root(&cluster, &extra).replace(OPERATOR_CHART, &prerequisites);
    let ws = Workspace::new(&text);
    ws.init();
    ws.ok(APPLY);
    let services = api(&client, ("", "v1", "Service"), "services", Some("default"));
    let service = get(&services, "typed")
        .await
        .expect("the Service was created");
    assert_eq!(service["spec"]["ports"][0]["port"], json!(8080));
    assert_eq!(service["spec"]["ports"][0]["name"], "typed-8080");
}
