//! The chart server against a Rust HTTPS client (index, digests, the OCI manifest/blob chain)
//! and against the real Helm (through a CONNECT proxy standing in for DNS), and the test charts
//! rendered and linted by the real Helm.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::ServerName;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::catalog::sha256_hex;
use super::*;

const CILIUM_VERSIONS: [&str; 8] = [
    "1.16.3", "1.17.9", "1.18.3", "1.18.4", "1.19.6", "1.19.7", "1.20.1", "1.20.2",
];

/// What `helm template` is told the cluster runs, as the provider's render Job does (a release
/// build of Helm 3.18 assumes v1.33.0 without it; see
/// [`helm_template_assumes_the_kubernetes_version_of_a_release_build`]).
const KUBE_VERSION: &str = "v1.33.2";

fn helm() -> PathBuf {
    let helm = default_helm();
    assert!(
        helm.is_file(),
        "the real Helm {} is missing: run scripts/install-tools.sh (or point TALOSBOOT_HELM at a Helm 3.18 binary)",
        helm.display()
    );
    helm
}

struct Fixture {
    server: ChartServer,
    certs: TestCertificates,
    dir: tempfile::TempDir,
}

async fn start() -> Fixture {
    let helm = helm();
    let hosts = served_hostnames(&default_charts_dir()).expect("hostnames");
    let certs = test_certificates(&hosts).expect("certificates");
    let dir = tempfile::tempdir().expect("tempdir");
    let server = ChartServer::start(ChartServerConfig {
        charts_dir: default_charts_dir(),
        helm,
        work_dir: dir.path().join("work"),
        cert_pem: certs.cert_pem.clone(),
        key_pem: certs.key_pem.clone(),
    })
    .await
    .expect("start the chart server");
    assert_eq!(server.hostnames(), hosts);
    Fixture { server, certs, dir }
}

fn client_config(ca_pem: &str, alpn: &[u8]) -> Arc<rustls::ClientConfig> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.expect("ca pem")).expect("add ca");
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocols")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    Arc::new(config)
}

/// One HTTPS request to the server as `host` (SNI and `Host`), HTTP/1.1.
async fn fetch(
    f: &Fixture,
    method: Method,
    host: &str,
    path: &str,
) -> (StatusCode, HeaderMap, Bytes) {
    let tcp = tokio::net::TcpStream::connect(f.server.addr())
        .await
        .expect("connect");
    let connector = tokio_rustls::TlsConnector::from(client_config(&f.certs.ca_pem, b"http/1.1"));
    let name = ServerName::try_from(host.to_string()).expect("server name");
    let tls = connector.connect(name, tcp).await.expect("TLS handshake");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .expect("http1 handshake");
    tokio::spawn(conn);
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", host)
        .header("user-agent", "talos-sim-test")
        .body(Empty::<Bytes>::new())
        .expect("request");
    let resp = sender.send_request(req).await.expect("send");
    let (parts, body) = resp.into_parts();
    let body = body.collect().await.expect("body").to_bytes();
    (parts.status, parts.headers, body)
}

fn header<'a>(h: &'a HeaderMap, name: &str) -> &'a str {
    h.get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classic_repositories_serve_an_index_whose_urls_and_digests_match_the_packages() {
    let f = start().await;
    for (host, path, chart, versions) in [
        ("helm.cilium.io", "", "cilium", CILIUM_VERSIONS.to_vec()),
        (
            "argoproj.github.io",
            "/argo-helm",
            "argo-cd",
            vec!["9.4.14", "9.4.15"],
        ),
    ] {
        let (status, headers, body) =
            fetch(&f, Method::GET, host, &format!("{path}/index.yaml")).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(header(&headers, "content-type"), "application/x-yaml");
        let index: Value =
            serde_saphyr::from_str(std::str::from_utf8(&body).unwrap()).expect("index.yaml parses");
        assert_eq!(index["apiVersion"], "v1");
        let entries = index["entries"][chart].as_array().expect("entries");
        let listed: Vec<&str> = entries
            .iter()
            .map(|e| e["version"].as_str().unwrap())
            .collect();
        let mut newest_first = versions.clone();
        newest_first.reverse();
        assert_eq!(listed, newest_first, "newest first");
        for e in entries {
            let version = e["version"].as_str().unwrap();
            let url = e["urls"][0].as_str().unwrap();
            assert_eq!(url, format!("https://{host}{path}/{chart}-{version}.tgz"));
            assert_eq!(e["name"], chart);
            assert_eq!(e["apiVersion"], "v2");
            assert!(e["created"].as_str().unwrap().ends_with('Z'));
            let (status, headers, tgz) = fetch(
                &f,
                Method::GET,
                host,
                url.trim_start_matches(&format!("https://{host}")),
            )
            .await;
            assert_eq!(status, StatusCode::OK, "{url}");
            assert_eq!(header(&headers, "content-length"), tgz.len().to_string());
            assert_eq!(e["digest"].as_str().unwrap(), sha256_hex(&tgz), "{url}");
            let meta = package_metadata(&tgz).expect("packaged Chart.yaml");
            assert_eq!(meta.version, version);
            assert_eq!(meta.app_version, e["appVersion"].as_str().unwrap());
        }
    }
    let cilium = f
        .server
        .published()
        .iter()
        .find(|p| p.name == "cilium" && p.version == "1.18.4")
        .expect("published");
    assert_eq!(cilium.app_version, "1.18.4");
    assert_eq!(cilium.url, "https://helm.cilium.io/cilium-1.18.4.tgz");
    // Unknown paths and hosts.
    let (status, _, _) = fetch(&f, Method::GET, "helm.cilium.io", "/cilium-9.9.9.tgz").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = fetch(&f, Method::GET, "argoproj.github.io", "/index.yaml").await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "argo's index is under /argo-helm"
    );
    let (status, headers, body) =
        fetch(&f, Method::HEAD, "helm.cilium.io", "/cilium-1.18.4.tgz").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.is_empty());
    assert_eq!(
        header(&headers, "content-length"),
        std::fs::metadata(&cilium.package)
            .unwrap()
            .len()
            .to_string(),
        "HEAD carries the length"
    );
    let log = f.server.requests();
    assert!(
        log.contains(&"GET helm.cilium.io/index.yaml".to_string()),
        "{log:?}"
    );
    assert!(
        log.contains(&"GET argoproj.github.io/argo-helm/argo-cd-9.4.15.tgz".to_string()),
        "{log:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oci_registries_serve_a_consistent_manifest_config_and_layer_chain() {
    let f = start().await;
    let (status, headers, body) = fetch(&f, Method::GET, "ghcr.io", "/v2/").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        header(&headers, "docker-distribution-api-version"),
        "registry/2.0"
    );
    assert_eq!(&body[..], b"{}");
    for (repo, chart, versions, app) in [
        (
            "controlplaneio-fluxcd/charts/flux-operator",
            "flux-operator",
            vec!["0.28.0", "0.33.0", "0.59.0"],
            "v",
        ),
        (
            "stefanprodan/charts/podinfo",
            "podinfo",
            vec!["6.8.0", "6.9.2"],
            "",
        ),
        ("example/charts/extra", "extra", vec!["0.1.0"], ""),
    ] {
        let (status, _, body) =
            fetch(&f, Method::GET, "ghcr.io", &format!("/v2/{repo}/tags/list")).await;
        assert_eq!(status, StatusCode::OK);
        let tags: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(tags, json!({"name": repo, "tags": versions}));
        for version in versions {
            let path = format!("/v2/{repo}/manifests/{version}");
            let (status, head, empty) = fetch(&f, Method::HEAD, "ghcr.io", &path).await;
            assert_eq!(status, StatusCode::OK, "{path}");
            assert!(empty.is_empty());
            let (status, headers, manifest) = fetch(&f, Method::GET, "ghcr.io", &path).await;
            assert_eq!(status, StatusCode::OK);
            for h in [&head, &headers] {
                assert_eq!(header(h, "content-type"), OCI_MANIFEST);
                assert_eq!(
                    header(h, "docker-content-digest"),
                    format!("sha256:{}", sha256_hex(&manifest))
                );
                assert_eq!(header(h, "content-length"), manifest.len().to_string());
            }
            let digest = header(&headers, "docker-content-digest").to_string();
            let (status, _, by_digest) = fetch(
                &f,
                Method::GET,
                "ghcr.io",
                &format!("/v2/{repo}/manifests/{digest}"),
            )
            .await;
            assert_eq!(status, StatusCode::OK);
            assert_eq!(by_digest, manifest);
            let m: Value = serde_json::from_slice(&manifest).unwrap();
            assert_eq!(m["schemaVersion"], 2);
            assert_eq!(m["config"]["mediaType"], HELM_CONFIG);
            assert_eq!(m["layers"].as_array().unwrap().len(), 1);
            assert_eq!(m["layers"][0]["mediaType"], HELM_CHART_LAYER);
            assert_eq!(
                m["annotations"]["org.opencontainers.image.version"],
                version
            );
            let mut blobs = Vec::new();
            for d in [&m["config"], &m["layers"][0]] {
                let digest = d["digest"].as_str().unwrap();
                let (status, headers, blob) = fetch(
                    &f,
                    Method::GET,
                    "ghcr.io",
                    &format!("/v2/{repo}/blobs/{digest}"),
                )
                .await;
                assert_eq!(status, StatusCode::OK);
                assert_eq!(format!("sha256:{}", sha256_hex(&blob)), digest);
                assert_eq!(d["size"].as_u64().unwrap(), blob.len() as u64);
                assert_eq!(header(&headers, "docker-content-digest"), digest);
                blobs.push(blob);
            }
            let config: Value = serde_json::from_slice(&blobs[0]).unwrap();
            assert_eq!(config["name"], chart);
            assert_eq!(config["version"], version);
            assert_eq!(config["appVersion"], format!("{app}{version}"));
            assert_eq!(config["apiVersion"], "v2");
            let package = f.server.package(chart, version).expect("package");
            assert_eq!(blobs[1], std::fs::read(package).unwrap(), "layer = package");
        }
    }
    // Paging as the distribution spec has it.
    let (_, headers, body) = fetch(
        &f,
        Method::GET,
        "example.com",
        "/v2/charts/foo/tags/list?n=1",
    )
    .await;
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap()["tags"],
        json!(["0.1.0"])
    );
    assert_eq!(
        header(&headers, "link"),
        "</v2/charts/foo/tags/list?n=1&last=0.1.0>; rel=\"next\""
    );
    // Errors in the OCI format.
    for (path, code) in [
        ("/v2/nobody/charts/x/tags/list", "NAME_UNKNOWN"),
        (
            "/v2/controlplaneio-fluxcd/charts/flux-operator/manifests/9.9.9",
            "MANIFEST_UNKNOWN",
        ),
        (
            "/v2/controlplaneio-fluxcd/charts/flux-operator/blobs/sha256:00",
            "BLOB_UNKNOWN",
        ),
    ] {
        let (status, headers, body) = fetch(&f, Method::GET, "ghcr.io", path).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(header(&headers, "content-type"), "application/json");
        let e: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(e["errors"][0]["code"], code, "{path}");
    }
    let (status, _, _) = fetch(&f, Method::POST, "ghcr.io", "/v2/x/blobs/uploads/").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    // The OCI hosts serve no classic index.
    let (status, _, _) = fetch(&f, Method::GET, "ghcr.io", "/index.yaml").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_is_negotiated_and_routed_by_authority() {
    let f = start().await;
    let tcp = tokio::net::TcpStream::connect(f.server.addr())
        .await
        .unwrap();
    let connector = tokio_rustls::TlsConnector::from(client_config(&f.certs.ca_pem, b"h2"));
    let tls = connector
        .connect(ServerName::try_from("helm.cilium.io").unwrap(), tcp)
        .await
        .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .unwrap();
    tokio::spawn(conn);
    let req = Request::builder()
        .uri("https://helm.cilium.io/index.yaml")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    assert!(
        std::str::from_utf8(&body)
            .unwrap()
            .contains("cilium-1.18.4.tgz")
    );
}

// ---------------------------------------------------------------------------------------------
// The real Helm against the server.

/// An HTTP CONNECT proxy tunnelling every request to `target`, whatever host it names: the
/// host's Helm reaches `https://helm.cilium.io` through it (`HTTPS_PROXY`) without DNS.
async fn connect_proxy(target: SocketAddr) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut client, _)) = listener.accept().await else {
                return;
            };
            let log = log.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
                    if client.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).to_string();
                let line = head.lines().next().unwrap_or_default().to_string();
                if !line.starts_with("CONNECT ") {
                    let _ = client
                        .write_all(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n")
                        .await;
                    return;
                }
                log.lock().unwrap().push(line);
                let Ok(mut upstream) = tokio::net::TcpStream::connect(target).await else {
                    return;
                };
                if client
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await
                    .is_err()
                {
                    return;
                }
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            });
        }
    });
    (addr, seen)
}

struct HostHelm {
    helm: PathBuf,
    home: PathBuf,
    proxy: SocketAddr,
    ca_file: PathBuf,
}

impl HostHelm {
    fn run(&self, args: &[&str]) -> std::process::Output {
        Command::new(&self.helm)
            .args(args)
            .current_dir(&self.home)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", &self.home)
            .env("DOCKER_CONFIG", self.home.join("docker"))
            .env("HELM_CACHE_HOME", self.home.join("cache"))
            .env("HELM_CONFIG_HOME", self.home.join("config"))
            .env("HELM_DATA_HOME", self.home.join("data"))
            // As in the pods: the CA is in the system bundle, no `--ca-file`.
            .env("SSL_CERT_FILE", &self.ca_file)
            .env("HTTPS_PROXY", format!("http://{}", self.proxy))
            .output()
            .expect("run helm")
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "helm {args:?} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(!out.status.success(), "helm {args:?} succeeded");
        String::from_utf8_lossy(&out.stderr).to_string()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_helm_pulls_from_the_classic_repositories_and_the_oci_registries() {
    let f = start().await;
    let (proxy, tunnels) = connect_proxy(f.server.addr()).await;
    let home = f.dir.path().join("helm-user");
    std::fs::create_dir_all(&home).unwrap();
    let ca_file = f.dir.path().join("ca.crt");
    std::fs::write(&ca_file, &f.certs.ca_pem).unwrap();
    let talos = f.dir.path().join("talos.json");
    std::fs::write(&talos, talos_values().to_string()).unwrap();
    let h = HostHelm {
        helm: helm(),
        home: home.clone(),
        proxy,
        ca_file,
    };
    let talos = talos.to_str().unwrap().to_string();
    let out = tokio::task::spawn_blocking(move || {
        let mut notes = Vec::new();
        // `--repo` (what the provider's Jobs run).
        let chart = h.ok(&[
            "show",
            "chart",
            "cilium",
            "--repo",
            "https://helm.cilium.io",
            "--version",
            "1.17.9",
        ]);
        assert!(
            chart.contains("name: cilium") && chart.contains("version: 1.17.9"),
            "{chart}"
        );
        let rendered = h.ok(&[
            "template",
            "cilium",
            "cilium",
            "--repo",
            "https://helm.cilium.io",
            "--version",
            "1.18.4",
            "--namespace",
            "kube-system",
            "--kube-version",
            KUBE_VERSION,
            "--values",
            &talos,
        ]);
        assert!(
            rendered.contains("image: \"quay.io/cilium/cilium:v1.18.4\""),
            "{rendered}"
        );
        assert!(!rendered.contains("mount-cgroup"), "{rendered}");
        // `helm repo add` + `cilium/cilium` (Talos' documented inline-manifest method).
        h.ok(&["repo", "add", "cilium", "https://helm.cilium.io"]);
        let rendered = h.ok(&[
            "template",
            "cilium",
            "cilium/cilium",
            "--version",
            "1.16.3",
            "--namespace",
            "kube-system",
            "--kube-version",
            KUBE_VERSION,
        ]);
        assert!(rendered.contains("quay.io/cilium/cilium:v1.16.3"));
        let search = h.ok(&["search", "repo", "cilium", "--versions"]);
        for v in CILIUM_VERSIONS {
            assert!(search.contains(v), "{search}");
        }
        // Unpinned: the newest in the index.
        let argo = h.ok(&[
            "show",
            "chart",
            "argo-cd",
            "--repo",
            "https://argoproj.github.io/argo-helm",
        ]);
        assert!(argo.contains("version: 9.4.15"), "{argo}");
        // OCI, pinned: the pulled file is the package byte for byte.
        let pulled = h.home.join("pulled");
        std::fs::create_dir_all(&pulled).unwrap();
        h.ok(&[
            "pull",
            "oci://ghcr.io/controlplaneio-fluxcd/charts/flux-operator",
            "--version",
            "0.33.0",
            "--destination",
            pulled.to_str().unwrap(),
        ]);
        let bytes = std::fs::read(pulled.join("flux-operator-0.33.0.tgz")).expect("pulled");
        notes.push(sha256_hex(&bytes));
        // OCI, unpinned: the newest tag.
        let podinfo = h.ok(&[
            "template",
            "podinfo",
            "oci://ghcr.io/stefanprodan/charts/podinfo",
            "--kube-version",
            KUBE_VERSION,
        ]);
        assert!(
            podinfo.contains("ghcr.io/stefanprodan/podinfo:6.9.2"),
            "{podinfo}"
        );
        // OCI, a version constraint.
        let foo = h.ok(&[
            "template",
            "foo",
            "oci://example.com/charts/foo",
            "--version",
            "^1.0.0",
            "--set",
            "replicas=2",
        ]);
        assert!(
            foo.contains("name: foo-rendered")
                && foo.contains("version: \"1.2.3\"")
                && foo.contains(r#"{\"replicas\":2}"#),
            "{foo}"
        );
        // What Helm says when a version is not there.
        notes.push(h.fails(&[
            "show",
            "chart",
            "cilium",
            "--repo",
            "https://helm.cilium.io",
            "--version",
            "9.9.9",
        ]));
        notes.push(h.fails(&[
            "pull",
            "oci://ghcr.io/controlplaneio-fluxcd/charts/flux-operator",
            "--version",
            "9.9.9",
            "--destination",
            pulled.to_str().unwrap(),
        ]));
        notes
    })
    .await
    .unwrap();
    assert_eq!(
        out[0],
        f.server
            .published()
            .iter()
            .find(|p| p.name == "flux-operator" && p.version == "0.33.0")
            .unwrap()
            .sha256
    );
    assert!(
        out[1].contains(
            "chart \"cilium\" version \"9.9.9\" not found in https://helm.cilium.io repository"
        ),
        "{}",
        out[1]
    );
    assert!(out[2].contains("not found"), "{}", out[2]);
    let log = f.server.requests();
    eprintln!("helm errors:\n{}\n{}", out[1], out[2]);
    eprintln!("requests:\n{}", log.join("\n"));
    eprintln!("tunnels:\n{}", tunnels.lock().unwrap().join("\n"));
    for want in [
        "GET helm.cilium.io/index.yaml",
        "GET helm.cilium.io/cilium-1.17.9.tgz",
        "GET helm.cilium.io/cilium-1.16.3.tgz",
        "GET argoproj.github.io/argo-helm/index.yaml",
        "GET argoproj.github.io/argo-helm/argo-cd-9.4.15.tgz",
        "GET ghcr.io/v2/stefanprodan/charts/podinfo/tags/list",
        "GET example.com/v2/charts/foo/tags/list",
    ] {
        assert!(log.iter().any(|l| l == want), "{want} not in {log:#?}");
    }
    assert!(
        log.iter().any(|l| l.starts_with(
            "GET ghcr.io/v2/controlplaneio-fluxcd/charts/flux-operator/blobs/sha256:"
        )),
        "{log:#?}"
    );
}

// ---------------------------------------------------------------------------------------------
// The charts, rendered and linted by the real Helm.

/// The values Talos needs for Cilium (as the provider's `talos_cilium_values`).
fn talos_values() -> Value {
    json!({
        "ipam": {"mode": "kubernetes"},
        "kubeProxyReplacement": true,
        "k8sServiceHost": "localhost",
        "k8sServicePort": 7445,
        "cgroup": {"autoMount": {"enabled": false}, "hostRoot": "/sys/fs/cgroup"},
        "securityContext": {"capabilities": {
            "ciliumAgent": ["CHOWN", "KILL", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "SYS_ADMIN", "SYS_RESOURCE", "DAC_OVERRIDE", "FOWNER", "SETGID", "SETUID"],
            "cleanCiliumState": ["NET_ADMIN", "SYS_ADMIN", "SYS_RESOURCE"],
        }},
    })
}

fn run_helm(args: &[&str], dir: &Path) -> Result<String, String> {
    let out = Command::new(helm())
        .args(args)
        .env("HELM_CACHE_HOME", dir.join("cache"))
        .env("HELM_CONFIG_HOME", dir.join("config"))
        .env("HELM_DATA_HOME", dir.join("data"))
        .output()
        .expect("run helm");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).to_string())
    } else {
        Err(text)
    }
}

/// `helm template <release> <chart> -n <ns> -f <values>`: the objects.
fn render(
    chart: &Path,
    release: &str,
    ns: &str,
    values: &Value,
    dir: &Path,
) -> Result<Vec<Value>, String> {
    let file = dir.join(format!(
        "values-{}.json",
        sha256_hex(values.to_string().as_bytes())
    ));
    std::fs::write(&file, values.to_string()).unwrap();
    let out = run_helm(
        &[
            "template",
            release,
            chart.to_str().unwrap(),
            "--namespace",
            ns,
            "--kube-version",
            KUBE_VERSION,
            "--values",
            file.to_str().unwrap(),
        ],
        dir,
    )?;
    let mut docs = Vec::new();
    let mut current = String::new();
    for line in out.lines().chain(std::iter::once("---")) {
        if line == "---" {
            if let Ok(v) = serde_saphyr::from_str::<Value>(&current) {
                if v.is_object() {
                    docs.push(v);
                }
            }
            current.clear();
        } else {
            current.push_str(line);
            current.push('\n');
        }
    }
    Ok(docs)
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
}

fn get<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    find(objects, kind, name).unwrap_or_else(|| panic!("{kind}/{name} in {}", names(objects)))
}

fn names(objects: &[Value]) -> String {
    objects
        .iter()
        .map(|o| {
            format!(
                "{}/{}",
                o["kind"].as_str().unwrap_or_default(),
                o["metadata"]["name"].as_str().unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn kinds_and_names(objects: &[Value]) -> BTreeSet<String> {
    names(objects).split(' ').map(str::to_string).collect()
}

fn container<'a>(pod_spec: &'a Value, list: &str, name: &str) -> &'a Value {
    pod_spec[list]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("{list} {name} in {pod_spec}"))
}

fn env_value(c: &Value, name: &str) -> Option<String> {
    c["env"].as_array()?.iter().find(|e| e["name"] == name)?["value"]
        .as_str()
        .map(str::to_string)
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cilium_chart_renders_like_upstream_at_every_version() {
    let f = start().await;
    let dir = f.dir.path().to_path_buf();
    for version in CILIUM_VERSIONS {
        let tgz = f.server.package("cilium", version).unwrap().to_path_buf();
        // Upstream defaults.
        let o = render(&tgz, "cilium", "kube-system", &json!({}), &dir).unwrap();
        let set = kinds_and_names(&o);
        for want in [
            "ServiceAccount/cilium",
            "ServiceAccount/cilium-operator",
            "ServiceAccount/cilium-envoy",
            "ConfigMap/cilium-config",
            "ConfigMap/cilium-envoy-config",
            "DaemonSet/cilium",
            "DaemonSet/cilium-envoy",
            "Deployment/cilium-operator",
            "ClusterRole/cilium",
            "ClusterRole/cilium-operator",
            "ClusterRoleBinding/cilium",
            "ClusterRoleBinding/cilium-operator",
            "Role/cilium-config-agent",
            "RoleBinding/cilium-config-agent",
            "Service/hubble-peer",
        ] {
            assert!(set.contains(want), "{version}: {want} in {set:?}");
        }
        for absent in [
            "Deployment/hubble-relay",
            "Deployment/hubble-ui",
            "Deployment/clustermesh-apiserver",
            "ServiceAccount/hubble-relay",
        ] {
            assert!(!set.contains(absent), "{version}: {absent} by default");
        }
        assert!(o.iter().all(|x| x["kind"] != "Secret"), "Secret-free");
        for x in &o {
            if x["kind"] != "ClusterRole" && x["kind"] != "ClusterRoleBinding" {
                assert_eq!(x["metadata"]["namespace"], "kube-system", "{x}");
            }
        }
        let cm = &get(&o, "ConfigMap", "cilium-config")["data"];
        assert_eq!(cm["ipam"], "cluster-pool");
        assert_eq!(cm["kube-proxy-replacement"], "false");
        assert_eq!(cm["k8s-service-host"], "");
        assert_eq!(cm["cgroup-root"], "/run/cilium/cgroupv2");
        assert_eq!(cm["cluster-name"], "default");
        let ds = get(&o, "DaemonSet", "cilium");
        assert_eq!(ds["metadata"]["labels"]["k8s-app"], "cilium");
        let pod = &ds["spec"]["template"]["spec"];
        assert_eq!(pod["hostNetwork"], true);
        assert_eq!(pod["tolerations"], json!([{"operator": "Exists"}]));
        assert_eq!(pod["serviceAccountName"], "cilium");
        let inits: Vec<&str> = pod["initContainers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            inits,
            [
                "config",
                "mount-cgroup",
                "apply-sysctl-overwrites",
                "mount-bpf-fs",
                "clean-cilium-state",
                "install-cni-binaries"
            ]
        );
        let agent = container(pod, "containers", "cilium-agent");
        assert_eq!(agent["image"], format!("quay.io/cilium/cilium:v{version}"));
        assert!(strings(&agent["securityContext"]["capabilities"]["add"]).contains(&"SYS_MODULE"));
        assert!(
            strings(
                &container(pod, "initContainers", "clean-cilium-state")["securityContext"]
                    ["capabilities"]["add"]
            )
            .contains(&"SYS_MODULE")
        );
        assert_eq!(env_value(agent, "KUBERNETES_SERVICE_HOST"), None);
        let op = get(&o, "Deployment", "cilium-operator");
        assert_eq!(op["spec"]["replicas"], 2);
        let op_pod = &op["spec"]["template"]["spec"];
        assert_eq!(op_pod["hostNetwork"], true);
        assert_eq!(op_pod["tolerations"], json!([{"operator": "Exists"}]));
        assert_eq!(
            op_pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                [0]["labelSelector"]["matchLabels"]["io.cilium/app"],
            "operator"
        );
        assert_eq!(
            container(op_pod, "containers", "cilium-operator")["image"],
            format!("quay.io/cilium/operator-generic:v{version}")
        );
        let envoy = &get(&o, "DaemonSet", "cilium-envoy")["spec"]["template"]["spec"];
        assert!(
            container(envoy, "containers", "cilium-envoy")["image"]
                .as_str()
                .unwrap()
                .starts_with("quay.io/cilium/cilium-envoy:v1.")
        );

        // Talos.
        let o = render(&tgz, "cilium", "kube-system", &talos_values(), &dir).unwrap();
        let cm = &get(&o, "ConfigMap", "cilium-config")["data"];
        assert_eq!(cm["ipam"], "kubernetes");
        assert_eq!(cm["kube-proxy-replacement"], "true");
        assert_eq!(cm["k8s-service-host"], "localhost");
        assert_eq!(cm["k8s-service-port"], "7445");
        assert_eq!(cm["cgroup-root"], "/sys/fs/cgroup");
        let pod = &get(&o, "DaemonSet", "cilium")["spec"]["template"]["spec"];
        let inits: Vec<&str> = pod["initContainers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert!(!inits.contains(&"mount-cgroup"), "{inits:?}");
        let agent = container(pod, "containers", "cilium-agent");
        let caps = strings(&agent["securityContext"]["capabilities"]["add"]);
        assert!(!caps.contains(&"SYS_MODULE") && caps.contains(&"SYS_ADMIN"));
        assert_eq!(
            strings(
                &container(pod, "initContainers", "clean-cilium-state")["securityContext"]["capabilities"]
                    ["add"]
            ),
            ["NET_ADMIN", "SYS_ADMIN", "SYS_RESOURCE"]
        );
        for c in [
            agent,
            container(pod, "initContainers", "config"),
            container(pod, "initContainers", "clean-cilium-state"),
        ] {
            assert_eq!(
                env_value(c, "KUBERNETES_SERVICE_HOST").as_deref(),
                Some("localhost")
            );
            assert_eq!(
                env_value(c, "KUBERNETES_SERVICE_PORT").as_deref(),
                Some("7445")
            );
        }
        let op = &get(&o, "Deployment", "cilium-operator")["spec"]["template"]["spec"];
        assert_eq!(
            env_value(
                container(op, "containers", "cilium-operator"),
                "KUBERNETES_SERVICE_HOST"
            )
            .as_deref(),
            Some("localhost")
        );
    }
    // The optional parts.
    let tgz = f.server.package("cilium", "1.18.4").unwrap().to_path_buf();
    let all = json!({"hubble": {"relay": {"enabled": true}, "ui": {"enabled": true}},
        "clustermesh": {"useAPIServer": true}, "envoy": {"enabled": false}, "operator": {"replicas": 1}});
    let o = render(&tgz, "cilium", "kube-system", &all, &dir).unwrap();
    let set = kinds_and_names(&o);
    for want in [
        "Deployment/hubble-relay",
        "Service/hubble-relay",
        "ServiceAccount/hubble-relay",
        "ConfigMap/hubble-relay-config",
        "Deployment/hubble-ui",
        "Service/hubble-ui",
        "Deployment/clustermesh-apiserver",
        "Service/clustermesh-apiserver",
    ] {
        assert!(set.contains(want), "{want} in {set:?}");
    }
    assert!(
        !set.contains("DaemonSet/cilium-envoy") && !set.contains("ServiceAccount/cilium-envoy")
    );
    assert_eq!(
        get(&o, "Deployment", "cilium-operator")["spec"]["replicas"],
        1
    );
    assert_eq!(
        get(&o, "ConfigMap", "cilium-config")["data"]["external-envoy-proxy"],
        "false"
    );
    let images: BTreeSet<String> = o
        .iter()
        .filter(|x| x["kind"] == "Deployment")
        .flat_map(|d| {
            d["spec"]["template"]["spec"]["containers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["image"].as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    for want in [
        "quay.io/cilium/hubble-relay:v1.18.4",
        "quay.io/cilium/hubble-ui:v0.13.1",
        "quay.io/cilium/hubble-ui-backend:v0.13.1",
        "quay.io/cilium/clustermesh-apiserver:v1.18.4",
        "quay.io/cilium/operator-generic:v1.18.4",
    ] {
        assert!(images.contains(want), "{want} in {images:?}");
    }
    // Refused as upstream refuses it.
    let err = render(
        &tgz,
        "cilium",
        "kube-system",
        &json!({"kubeProxyReplacement": "strict"}),
        &dir,
    )
    .unwrap_err();
    assert!(
        err.contains("kubeProxyReplacement must be explicitly set"),
        "{err}"
    );
}

/// Keys each minor has or dropped (upstream "1.19 Upgrade Notes" and 1.20's removed values):
/// a key a version no longer has renders nothing, without an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cilium_chart_renders_only_the_value_keys_of_its_minor() {
    let f = start().await;
    let dir = f.dir.path().to_path_buf();
    let values = json!({
        "nodePort": {"enabled": true},
        "hostPort": {"enabled": true},
        "encryption": {"strictMode": {"enabled": true, "egress": {"enabled": true}}},
        "gatewayAPI": {"enabled": true},
    });
    // (version, enable-node-port/-host-port, flat strict mode, egress strict mode)
    let table = [
        ("1.18.4", true, true, false),
        ("1.19.7", false, true, true),
        ("1.20.2", false, false, true),
    ];
    for (version, node_port, flat, egress) in table {
        let tgz = f.server.package("cilium", version).unwrap().to_path_buf();
        let o = render(&tgz, "cilium", "kube-system", &values, &dir)
            .unwrap_or_else(|e| panic!("{version}: unknown or removed keys render: {e}"));
        let cm = &get(&o, "ConfigMap", "cilium-config")["data"];
        let has = |key: &str| cm.get(key).is_some_and(|v| v == "true");
        assert_eq!(has("enable-node-port"), node_port, "{version}: {cm}");
        assert_eq!(has("enable-host-port"), node_port, "{version}: {cm}");
        assert_eq!(
            has("enable-encryption-strict-mode"),
            flat,
            "{version}: {cm}"
        );
        assert_eq!(
            has("enable-encryption-strict-mode-egress"),
            egress,
            "{version}: {cm}"
        );
        assert_eq!(cm["enable-gateway-api"], "true", "{version}");
        let defaults = render(&tgz, "cilium", "kube-system", &json!({}), &dir).unwrap();
        assert_eq!(
            get(&defaults, "ConfigMap", "cilium-config")["data"]["enable-gateway-api"],
            "false"
        );
    }
}

/// The pre-flight release of Cilium's upgrade guide (`preflight.enabled=true agent=false
/// operator.enabled=false`) renders only upstream's pre-flight objects, none of the `cilium`
/// release's (so both install side by side); `agent=false` or `operator.enabled=false` alone skip
/// what upstream skips with them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cilium_pre_flight_renders_only_its_own_objects() {
    let f = start().await;
    let dir = f.dir.path().to_path_buf();
    let values = json!({"preflight": {"enabled": true}, "agent": false,
        "operator": {"enabled": false}, "k8sServiceHost": "localhost", "k8sServicePort": 7445});
    for version in ["1.19.7", "1.20.2"] {
        let tgz = f.server.package("cilium", version).unwrap().to_path_buf();
        let o = render(&tgz, "cilium-preflight", "kube-system", &values, &dir).unwrap();
        let set = kinds_and_names(&o);
        let expected: BTreeSet<String> = [
            "DaemonSet/cilium-pre-flight-check",
            "Deployment/cilium-pre-flight-check",
            "ServiceAccount/cilium-pre-flight",
            "ClusterRole/cilium-pre-flight",
            "ClusterRoleBinding/cilium-pre-flight",
        ]
        .into_iter()
        .map(String::from)
        .collect();
        assert_eq!(set, expected, "{version}: nothing of the cilium release");
        let ds = get(&o, "DaemonSet", "cilium-pre-flight-check");
        assert_eq!(
            ds["spec"]["selector"]["matchLabels"],
            json!({"k8s-app": "cilium-pre-flight-check", "kubernetes.io/cluster-service": "true"})
        );
        let pod = &ds["spec"]["template"]["spec"];
        let image = format!("quay.io/cilium/cilium:v{version}");
        for (list, name) in [
            ("initContainers", "clean-cilium-state"),
            ("containers", "cilium-pre-flight-check"),
        ] {
            assert_eq!(
                container(pod, list, name)["image"],
                image.as_str(),
                "{name}"
            );
        }
        assert_eq!(pod["hostNetwork"], true);
        assert_eq!(pod["priorityClassName"], "system-node-critical");
        assert_eq!(pod["serviceAccountName"], "cilium-pre-flight");
        assert_eq!(
            pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["labelSelector"]
                ["matchLabels"]["k8s-app"],
            "cilium",
            "only where an agent runs"
        );
        let tolerated: Vec<&str> = pod["tolerations"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["key"].as_str())
            .collect();
        assert!(
            tolerated.contains(&"node-role.kubernetes.io/control-plane")
                && tolerated.contains(&"node.kubernetes.io/not-ready"),
            "{tolerated:?}"
        );
        // As upstream: the check itself gets no API endpoint; the policy validator does.
        let check = container(pod, "containers", "cilium-pre-flight-check");
        assert_eq!(env_value(check, "KUBERNETES_SERVICE_HOST"), None);
        let validator =
            &get(&o, "Deployment", "cilium-pre-flight-check")["spec"]["template"]["spec"];
        let cnp = container(validator, "containers", "cnp-validator");
        assert_eq!(
            (
                env_value(cnp, "KUBERNETES_SERVICE_HOST").as_deref(),
                env_value(cnp, "KUBERNETES_SERVICE_PORT").as_deref()
            ),
            (Some("localhost"), Some("7445"))
        );
        // With the FQDN pre-cache, its poller container has the endpoint too.
        let mut fqdn = values.clone();
        fqdn["preflight"]["tofqdnsPreCache"] = json!("/var/run/cilium/dns-precache.json");
        let o = render(&tgz, "cilium-preflight", "kube-system", &fqdn, &dir).unwrap();
        let pod = &get(&o, "DaemonSet", "cilium-pre-flight-check")["spec"]["template"]["spec"];
        let poller = container(pod, "containers", "cilium-pre-flight-fqdn-precache");
        assert_eq!(
            env_value(poller, "KUBERNETES_SERVICE_HOST").as_deref(),
            Some("localhost")
        );
        // Agent off, operator on: the operator and its cilium-config, no agent objects.
        let o = render(
            &tgz,
            "cilium",
            "kube-system",
            &json!({"agent": false}),
            &dir,
        )
        .unwrap();
        let set = kinds_and_names(&o);
        assert!(
            set.contains("Deployment/cilium-operator") && set.contains("ConfigMap/cilium-config")
        );
        for gone in [
            "DaemonSet/cilium",
            "ServiceAccount/cilium",
            "ClusterRole/cilium",
            "Role/cilium-config-agent",
            "Service/hubble-peer",
            "DaemonSet/cilium-pre-flight-check",
        ] {
            assert!(!set.contains(gone), "{gone} in {set:?}");
        }
        let o = render(
            &tgz,
            "cilium",
            "kube-system",
            &json!({"operator": {"enabled": false}}),
            &dir,
        )
        .unwrap();
        let set = kinds_and_names(&o);
        assert!(set.contains("DaemonSet/cilium") && !set.contains("Deployment/cilium-operator"));
    }
}

/// `upgradeCompatibility` keeps the defaults of the minor first installed, as upstream's
/// `semverCompare ... (default "X" .Values.upgradeCompatibility)`: chart 1.20 defaults
/// `envoy-xds-mode` to `ads`, `"1.19"` keeps 1.19's `split` (chart 1.19 has no such key), an
/// explicit `envoy.xdsMode` wins; `"1.15"` keeps Envoy inside the agent (its DaemonSet from 1.16).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrade_compatibility_keeps_the_first_installed_minors_defaults() {
    let f = start().await;
    let dir = f.dir.path().to_path_buf();
    let xds = |version: &str, values: Value| {
        let tgz = f.server.package("cilium", version).unwrap().to_path_buf();
        let o = render(&tgz, "cilium", "kube-system", &values, &dir).unwrap();
        get(&o, "ConfigMap", "cilium-config")["data"]
            .get("envoy-xds-mode")
            .and_then(Value::as_str)
            .map(String::from)
    };
    let table: [(&str, Value, Option<&str>); 6] = [
        ("1.20.2", json!({}), Some("ads")),
        (
            "1.20.1",
            json!({"upgradeCompatibility": "1.20"}),
            Some("ads"),
        ),
        (
            "1.20.2",
            json!({"upgradeCompatibility": "1.19"}),
            Some("split"),
        ),
        (
            "1.20.2",
            json!({"upgradeCompatibility": "1.18"}),
            Some("split"),
        ),
        (
            "1.20.2",
            json!({"upgradeCompatibility": "1.19", "envoy": {"xdsMode": "ads"}}),
            Some("ads"),
        ),
        ("1.19.7", json!({"upgradeCompatibility": "1.19"}), None),
    ];
    for (version, values, want) in table {
        assert_eq!(
            xds(version, values.clone()).as_deref(),
            want,
            "{version} {values}"
        );
    }
    let tgz = f.server.package("cilium", "1.20.2").unwrap().to_path_buf();
    let old = render(
        &tgz,
        "cilium",
        "kube-system",
        &json!({"upgradeCompatibility": "1.15"}),
        &dir,
    )
    .unwrap();
    assert!(find(&old, "DaemonSet", "cilium-envoy").is_none());
    assert_eq!(
        get(&old, "ConfigMap", "cilium-config")["data"]["external-envoy-proxy"],
        "false"
    );
    let new = render(&tgz, "cilium", "kube-system", &json!({}), &dir).unwrap();
    assert!(find(&new, "DaemonSet", "cilium-envoy").is_some());
    // Upstream's update strategy of the agents (values.yaml: maxUnavailable 2).
    assert_eq!(
        get(&new, "DaemonSet", "cilium")["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}})
    );
}

/// Whether `scripts/install-tools.sh` has generated the Flux Operator's CRDs.
fn generated_crds() -> bool {
    crate::talos::tools::root()
        .join("flux/crds/flux-operator.yaml")
        .is_file()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_flux_operator_argo_cd_podinfo_and_generic_charts_render_like_upstream() {
    let f = start().await;
    let dir = f.dir.path().to_path_buf();
    for version in ["0.28.0", "0.33.0", "0.59.0"] {
        let tgz = f
            .server
            .package("flux-operator", version)
            .unwrap()
            .to_path_buf();
        let o = render(&tgz, "flux-operator", "flux-system", &json!({}), &dir).unwrap();
        for plural in ["fluxinstances", "fluxreports"] {
            let crd = get(
                &o,
                "CustomResourceDefinition",
                &format!("{plural}.fluxcd.controlplane.io"),
            );
            let v = &crd["spec"]["versions"][0];
            assert_eq!(crd["spec"]["scope"], "Namespaced");
            assert_eq!(v["name"], "v1");
            assert_eq!(v["subresources"]["status"], json!({}));
            let schema = &v["schema"]["openAPIV3Schema"];
            // Upstream's CRDs are kept on uninstall, in every chart version.
            assert_eq!(
                crd["metadata"]["annotations"]["helm.sh/resource-policy"], "keep",
                "{plural} at {version}"
            );
            if version == "0.59.0" && generated_crds() {
                // The generated CRDs: the real schema and its defaults.
                if plural == "fluxinstances" {
                    assert_eq!(
                        schema.pointer(
                            "/properties/spec/properties/sync/properties/interval/default"
                        ),
                        Some(&json!("1m"))
                    );
                }
            } else {
                assert_eq!(schema["x-kubernetes-preserve-unknown-fields"], true);
            }
        }
        let d = get(&o, "Deployment", "flux-operator");
        let pod = &d["spec"]["template"]["spec"];
        assert!(pod.get("hostNetwork").is_none(), "not hostNetwork");
        assert_eq!(pod["serviceAccountName"], "flux-operator");
        let manager = container(pod, "containers", "manager");
        assert_eq!(
            manager["image"],
            format!("ghcr.io/controlplaneio-fluxcd/flux-operator:v{version}")
        );
        // Upstream's env: the runtime namespace, the report interval, the web UI's port.
        let env = |name: &str| {
            manager["env"]
                .as_array()
                .and_then(|e| e.iter().find(|e| e["name"] == name))
                .cloned()
                .unwrap_or_default()
        };
        assert_eq!(
            env("RUNTIME_NAMESPACE")["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.namespace"
        );
        assert_eq!(env("REPORTING_INTERVAL")["value"], "5m");
        let web_port = if version == "0.28.0" { "0" } else { "9080" };
        assert_eq!(env("WEB_SERVER_PORT")["value"], web_port);
        assert_eq!(manager["args"], json!(["--log-level=info"]));
        let svc = get(&o, "Service", "flux-operator");
        assert_eq!(svc["spec"]["type"], "ClusterIP");
        assert_eq!(svc["spec"]["ports"][0]["port"], 8080);
        let web = svc["spec"]["ports"].as_array().unwrap().len() == 2;
        assert_eq!(web, version != "0.28.0", "the web UI from 0.30 on");
        get(&o, "ServiceAccount", "flux-operator");
        assert_eq!(
            get(&o, "ClusterRoleBinding", "flux-operator")["roleRef"]["name"],
            "cluster-admin"
        );
        let o = render(
            &tgz,
            "flux-operator",
            "flux-system",
            &json!({"hostNetwork": true, "tolerations": [{"operator": "Exists"}], "installCRDs": false}),
            &dir,
        )
        .unwrap();
        let pod = &get(&o, "Deployment", "flux-operator")["spec"]["template"]["spec"];
        assert_eq!(pod["hostNetwork"], true);
        assert_eq!(pod["tolerations"], json!([{"operator": "Exists"}]));
        assert!(o.iter().all(|x| x["kind"] != "CustomResourceDefinition"));
    }

    let tgz = f.server.package("argo-cd", "9.4.15").unwrap().to_path_buf();
    let values = json!({"global": {"domain": "argocd.example.com"}, "configs": {"params": {"server.insecure": true}}});
    let o = render(&tgz, "argocd", "argocd", &values, &dir).unwrap();
    for (kind, name) in [
        ("Deployment", "argocd-server"),
        ("Deployment", "argocd-repo-server"),
        ("Deployment", "argocd-redis"),
        ("Deployment", "argocd-dex-server"),
        ("Deployment", "argocd-applicationset-controller"),
        ("Deployment", "argocd-notifications-controller"),
        ("StatefulSet", "argocd-application-controller"),
        ("Service", "argocd-server"),
        ("Service", "argocd-repo-server"),
        ("Secret", "argocd-secret"),
        ("ConfigMap", "argocd-cm"),
        ("CustomResourceDefinition", "applications.argoproj.io"),
        ("ClusterRole", "argocd-application-controller"),
    ] {
        let x = get(&o, kind, name);
        if kind != "CustomResourceDefinition" && kind != "ClusterRole" {
            assert_eq!(x["metadata"]["namespace"], "argocd", "{kind}/{name}");
        }
    }
    assert_eq!(
        get(&o, "ConfigMap", "argocd-cm")["data"]["url"],
        "https://argocd.example.com"
    );
    assert_eq!(
        get(&o, "ConfigMap", "argocd-cmd-params-cm")["data"]["server.insecure"],
        "true"
    );
    let server = get(&o, "Deployment", "argocd-server");
    assert_eq!(
        server["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/instance"],
        "argocd"
    );
    assert_eq!(
        container(&server["spec"]["template"]["spec"], "containers", "server")["image"],
        "quay.io/argoproj/argocd:v3.3.6"
    );
    let o = render(&tgz, "argo-cd", "argocd", &json!({}), &dir).unwrap();
    get(&o, "Deployment", "argo-cd-argocd-server");
    get(&o, "Deployment", "argo-cd-argocd-repo-server");
    get(&o, "StatefulSet", "argo-cd-argocd-application-controller");
    get(&o, "Secret", "argocd-secret");

    let tgz = f.server.package("podinfo", "6.9.2").unwrap().to_path_buf();
    let o = render(&tgz, "podinfo", "default", &json!({}), &dir).unwrap();
    let d = get(&o, "Deployment", "podinfo");
    assert_eq!(
        container(&d["spec"]["template"]["spec"], "containers", "podinfo")["image"],
        "ghcr.io/stefanprodan/podinfo:6.9.2"
    );
    get(&o, "Service", "podinfo");

    for (chart, version) in [("foo", "1.2.3"), ("extra", "0.1.0")] {
        let tgz = f.server.package(chart, version).unwrap().to_path_buf();
        let o = render(&tgz, "rel", "extras", &json!({"replicas": 2}), &dir).unwrap();
        assert_eq!(o.len(), 1, "{}", names(&o));
        let cm = get(&o, "ConfigMap", "rel-rendered");
        assert_eq!(cm["metadata"]["namespace"], "extras");
        assert_eq!(cm["data"]["chart"], chart);
        assert_eq!(cm["data"]["version"], version);
        assert_eq!(cm["data"]["values.json"], r#"{"replicas":2}"#);
    }
}

#[test]
fn every_chart_passes_helm_lint_with_its_defaults_and_the_talos_values() {
    let dir = tempfile::tempdir().unwrap();
    let talos = dir.path().join("talos.json");
    std::fs::write(&talos, talos_values().to_string()).unwrap();
    let mut charts = Vec::new();
    for entry in std::fs::read_dir(default_charts_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.join("Chart.yaml").is_file() {
            charts.push(path);
        }
    }
    assert!(charts.len() >= 5, "{charts:?}");
    for chart in &charts {
        let c = chart.to_str().unwrap();
        let out = run_helm(&["lint", "--strict", c], dir.path()).unwrap_or_else(|e| panic!("{e}"));
        assert!(out.contains("0 chart(s) failed"), "{out}");
        let out = run_helm(
            &["lint", "--strict", c, "--values", talos.to_str().unwrap()],
            dir.path(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(out.contains("0 chart(s) failed"), "{out}");
        // Rendering with the defaults works too (lint renders, but hides nothing here).
        run_helm(
            &["template", "t", c, "--kube-version", KUBE_VERSION],
            dir.path(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    }
}

/// A release build of Helm 3.18.4 (its Makefile's ldflags) renders client-side for Kubernetes
/// v1.33.0 (client-go v0.33 + 1 major); a plain `go build` leaves Helm's v1.20.0 fallback, and
/// then `helm template` without `--kube-version` refuses charts with `kubeVersion: >= 1.21.0-0`
/// (the real Cilium chart's, Talos' documented inline-manifest method).
#[test]
fn helm_template_assumes_the_kubernetes_version_of_a_release_build() {
    let dir = tempfile::tempdir().unwrap();
    let chart = dir.path().join("kv");
    std::fs::create_dir_all(chart.join("templates")).unwrap();
    std::fs::write(
        chart.join("Chart.yaml"),
        "apiVersion: v2\nname: kv\nversion: 0.1.0\n",
    )
    .unwrap();
    std::fs::write(
        chart.join("templates/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kv\ndata:\n  kube: {{ .Capabilities.KubeVersion.Version | quote }}\n",
    )
    .unwrap();
    let out = run_helm(&["template", "kv", chart.to_str().unwrap()], dir.path()).unwrap();
    assert!(
        out.contains("kube: \"v1.33.0\""),
        "{} was built without Helm's release ldflags (scripts/install-tools.sh should pass \
         -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=33 \
         -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=33, \
         as Helm's Makefile derives them from client-go v0.33): `helm template` assumes another Kubernetes version:\n{out}",
        helm().display()
    );
}
