//! Git on loopback (`talos_sim::talos::git`): the hosts users name resolve inside pods only, to
//! the project's `git-server` over SSH; a pod's real `git` and `ssh` clone with a key the test
//! authorized and the `known_hosts` the cluster wrote; a new commit shows; a revoked key is
//! refused with OpenSSH's words.

use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, PostParams};
use serde_json::json;
use talos_sim::talos::TalosConfig;
use talos_sim::talos::git::GitConfig;

use super::common::{self, from_json};

const NS: &str = "git-test";
const GITHUB: &str = "ssh://git@github.com/acme/fleet.git";
/// As `examples/talos-cilium-flux` writes it.
const BACKUP: &str = "ssh://git@backup.example.internal/srv/git/infra.git";
/// The scp form `git` users type for GitHub (Flux itself wants `ssh://`).
const GITHUB_SCP: &str = "git@github.com:acme/fleet.git";

fn keygen(dir: &std::path::Path, name: &str) -> (String, String) {
    let path = dir.join(name);
    let ok = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
        .arg(&path)
        .status()
        .expect("ssh-keygen runs")
        .success();
    assert!(ok);
    (
        std::fs::read_to_string(&path).unwrap(),
        std::fs::read_to_string(path.with_extension("pub")).unwrap(),
    )
}

/// A pod (host network: no CNI needed) that runs `script` with the Secret `keys` at `/keys`.
fn client(name: &str, host_network: bool, script: &str) -> Pod {
    from_json(json!({
        "metadata": {"name": name},
        "spec": {
            "hostNetwork": host_network,
            "restartPolicy": "Never",
            "tolerations": [{"operator": "Exists"}],
            "volumes": [{"name": "keys", "secret": {"secretName": "keys", "defaultMode": 256}}],
            "containers": [{
                "name": "c", "image": "debian:12", "command": ["sh", "-c", script],
                "env": [{"name": "GIT_SSH_COMMAND", "value": "ssh -i /keys/identity -o UserKnownHostsFile=/keys/known_hosts -o StrictHostKeyChecking=yes -o BatchMode=yes"}],
                "volumeMounts": [{"name": "keys", "mountPath": "/keys"}],
            }],
        },
    }))
}

async fn run(
    cluster: &talos_sim::talos::TalosCluster,
    client: &kube::Client,
    name: &str,
    host_network: bool,
    script: &str,
) -> (bool, String) {
    Api::<Pod>::namespaced(client.clone(), NS)
        .create(
            &PostParams::default(),
            &self::client(name, host_network, script),
        )
        .await
        .expect("pod");
    let pod = common::wait_pod(client, NS, name, 90, |p| {
        matches!(common::phase(p), "Succeeded" | "Failed")
    })
    .await;
    let log = common::run_kubectl(cluster, &["logs", "-n", NS, name]).1;
    (common::phase(&pod) == "Succeeded", log)
}

#[tokio::test(flavor = "multi_thread")]
async fn pods_clone_over_ssh_from_the_hosts_users_name() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = dir.path().join("fleet");
    std::fs::create_dir_all(fleet.join("clusters/staging")).unwrap();
    std::fs::write(fleet.join("clusters/staging/app.yaml"), "app: one\n").unwrap();
    let known_hosts = dir.path().join("known_hosts");
    let (identity, public) = keygen(dir.path(), "deploy");
    let (cluster, client) = common::start_with(TalosConfig {
        git: GitConfig {
            repositories: vec![
                (GITHUB.into(), fleet.clone()),
                (BACKUP.into(), fleet.clone()),
            ],
            authorized_keys: Vec::new(),
            known_hosts_out: Some(known_hosts.clone()),
            read_only_hosts: vec!["backup.example.internal".into()],
        },
        ..TalosConfig::default()
    })
    .await;
    let git = cluster.git().expect("Git servers");
    let written = std::fs::read_to_string(&known_hosts).unwrap();
    assert_eq!(written, git.known_hosts());
    assert!(
        written.starts_with("backup.example.internal ssh-ed25519 "),
        "{written}"
    );
    assert!(written.contains("\ngithub.com ssh-ed25519 "), "{written}");
    git.authorize(&public).unwrap();

    common::privileged_namespace(&client, NS).await;
    let secret: Secret = from_json(json!({
        "metadata": {"name": "keys"},
        "stringData": {"identity": identity, "known_hosts": written},
    }));
    Api::<Secret>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &secret)
        .await
        .expect("secret");

    let head = git.head(GITHUB).await.unwrap();
    let clone = format!(
        "git ls-remote {GITHUB} && mkdir -p /tmp && git clone -q {GITHUB} /tmp/fleet && cat /tmp/fleet/clusters/staging/app.yaml && git ls-remote {BACKUP} && git ls-remote {GITHUB_SCP}"
    );
    let (ok, log) = run(&cluster, &client, "clone", true, &clone).await;
    assert!(ok, "{log}");
    assert!(log.contains(&format!("{head}\tHEAD")), "{log}");
    assert!(log.contains("app: one"), "{log}");
    // Each host serves its own repository's commit (the two are equal only when both were
    // written in the same second), GitHub's in both URL forms.
    let backup = git.head(BACKUP).await.unwrap();
    let main_branches: Vec<&str> = log
        .lines()
        .filter(|l| l.ends_with("\trefs/heads/main"))
        .collect();
    assert_eq!(
        main_branches,
        [head.as_str(), backup.as_str(), head.as_str()]
            .map(|commit| format!("{commit}\trefs/heads/main")),
        "GitHub, the backup, GitHub in the scp form: {log}"
    );

    // From a pod's own network (Flux's controllers run there) once the CNI is up.
    common::cni_up(&cluster, &client).await;
    let (ok, log) = run(
        &cluster,
        &client,
        "pod-network",
        false,
        &format!("git ls-remote {GITHUB}"),
    )
    .await;
    assert!(ok, "{log}");
    assert!(log.contains(&format!("{head}\tHEAD")), "{log}");

    // A new commit; the test's own git on the machine sees it too.
    let next = git
        .commit_files(
            GITHUB,
            &[("clusters/staging/app.yaml", "app: two\n")],
            "two",
        )
        .await
        .unwrap();
    assert_ne!(next, head);
    let machine_hosts = dir.path().join("machine_known_hosts");
    std::fs::write(&machine_hosts, git.known_hosts_for_machine()).unwrap();
    let out = std::process::Command::new("git")
        .args(["ls-remote", &git.machine_url(GITHUB).unwrap()])
        .env(
            "GIT_SSH_COMMAND",
            format!(
                "ssh -i {} -o UserKnownHostsFile={} -o StrictHostKeyChecking=yes -o BatchMode=yes",
                dir.path().join("deploy").display(),
                machine_hosts.display()
            ),
        )
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        listed.contains(&format!("{next}\trefs/heads/main")),
        "{listed} {:?}",
        out
    );

    // A push reaches GitHub's repository; the backup host refuses it (read-only).
    let ssh = format!(
        "ssh -i {} -o UserKnownHostsFile={} -o StrictHostKeyChecking=yes -o BatchMode=yes",
        dir.path().join("deploy").display(),
        machine_hosts.display()
    );
    let work = dir.path().join("work");
    let sh = |script: String| {
        std::process::Command::new("sh")
            .args(["-c", &script])
            .env("GIT_SSH_COMMAND", &ssh)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap()
    };
    let pushed = sh(format!(
        "git clone -q {github} {w} && cd {w} && echo three > three && git add three && git -c user.name=t -c user.email=t@t commit -qm three && git push -q origin main",
        github = git.machine_url(GITHUB).unwrap(),
        w = work.display()
    ));
    assert!(pushed.status.success(), "{pushed:?}");
    assert_ne!(git.head(GITHUB).await.unwrap(), next);
    let refused = sh(format!(
        "cd {w} && git push -q {backup} main",
        backup = git.machine_url(BACKUP).unwrap(),
        w = work.display()
    ));
    assert!(!refused.status.success(), "{refused:?}");
    assert_eq!(
        git.head(BACKUP).await.unwrap(),
        backup,
        "the read-only backup is unchanged"
    );

    // The key revoked: OpenSSH's refusal, from inside the pod.
    git.revoke(&public).unwrap();
    let (ok, log) = run(
        &cluster,
        &client,
        "revoked",
        true,
        &format!("git ls-remote {GITHUB} 2>&1"),
    )
    .await;
    assert!(!ok, "{log}");
    assert!(log.contains("Permission denied (publickey)"), "{log}");
}
