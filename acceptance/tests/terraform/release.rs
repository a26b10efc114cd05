//! `scripts/release` (on the debug binary, to save the release build): the registry's three files,
//! then the zip installed by a real `init` from a filesystem mirror in "packed" layout
//! (`HOST/NAMESPACE/TYPE/terraform-provider-TYPE_VERSION_OS_ARCH.zip`, no network mirror), with
//! the lock file's `h1:` hash checked against one computed here from the binary.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use base64::Engine;

use crate::harness::{PROVIDER_VERSION, Workspace, repo_root};

const NAME: &str = "terraform-provider-talosboot";

fn debug_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>")
        .join(NAME)
}

fn sha256_hex(data: &[u8]) -> String {
    let mut child = Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run sha256sum");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(data).expect("write to sha256sum");
    }
    let out = child.wait_with_output().expect("sha256sum");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .expect("a digest")
        .to_owned()
}

fn hex_to_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

/// Go's `dirhash.Hash1` over the unpacked package, as the lock file records it: the SHA-256 of
/// the lines `<sha256 hex>  <file name>\n`, sorted by name, base64.
fn h1(files: &[(&str, &[u8])]) -> String {
    let mut lines: Vec<String> = files
        .iter()
        .map(|(name, data)| format!("{}  {name}\n", sha256_hex(data)))
        .collect();
    lines.sort();
    let digest = hex_to_bytes(&sha256_hex(lines.concat().as_bytes()));
    format!(
        "h1:{}",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

fn run_release(dist: &Path, version: &str) -> std::process::Output {
    Command::new("bash")
        .arg(repo_root().join("scripts/release"))
        .arg(version)
        .env("TALOSBOOT_RELEASE_BINARY", debug_binary())
        .env("TALOSBOOT_RELEASE_DIST", dist)
        .output()
        .expect("run scripts/release")
}

/// The release files, made once per test process (both CLIs install the same zip), and checked.
fn released() -> &'static (PathBuf, String) {
    static DIST: OnceLock<(PathBuf, String)> = OnceLock::new();
    DIST.get_or_init(|| {
        // Under acceptance/.work (ignored by git), one per test process; those of finished
        // processes are removed here, since a static outlives no process to clean up after it.
        let work = repo_root().join("acceptance/.work");
        for entry in std::fs::read_dir(&work).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(pid) = name.strip_prefix("release-dist-") {
                if !Path::new("/proc").join(pid).exists() {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
        let dist = work.join(format!("release-dist-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dist);
        let out = run_release(&dist, PROVIDER_VERSION);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "scripts/release failed:\n{stderr}");
        check_release(&dist, &stderr);
        (dist, stderr)
    })
}

fn check_release(dist: &Path, stderr: &str) {
    let zip = format!("{NAME}_{PROVIDER_VERSION}_linux_amd64.zip");
    let manifest = format!("{NAME}_{PROVIDER_VERSION}_manifest.json");
    let sums = format!("{NAME}_{PROVIDER_VERSION}_SHA256SUMS");
    let mut written: Vec<String> = std::fs::read_dir(dist)
        .expect("dist")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    assert_eq!(
        written,
        [sums.clone(), zip.clone(), manifest.clone()],
        "{stderr}"
    );
    let manifest_bytes = std::fs::read(dist.join(&manifest)).expect("manifest");
    let manifest_json: serde_json::Value =
        serde_json::from_slice(&manifest_bytes).expect("manifest is JSON");
    assert_eq!(
        manifest_json,
        serde_json::json!({"version": 1, "metadata": {"protocol_versions": ["6.0"]}})
    );
    // SHA256SUMS covers the zip and the manifest, in `sha256sum` format.
    let sums_text = std::fs::read_to_string(dist.join(&sums)).expect("sums");
    let zip_bytes = std::fs::read(dist.join(&zip)).expect("zip");
    assert_eq!(
        sums_text,
        format!(
            "{}  {zip}\n{}  {manifest}\n",
            sha256_hex(&zip_bytes),
            sha256_hex(&manifest_bytes)
        )
    );
    assert!(
        stderr.contains("MiB"),
        "the script reports the binary size:\n{stderr}"
    );
    // The same input gives the same bytes.
    let again = tempfile::tempdir().expect("tempdir");
    assert!(run_release(again.path(), PROVIDER_VERSION).status.success());
    assert_eq!(
        std::fs::read(again.path().join(&zip)).expect("zip"),
        zip_bytes,
        "the zip is reproducible"
    );
    // A version other than the crate's is refused.
    let other = run_release(again.path(), "9.9.9");
    assert_eq!(other.status.code(), Some(2));
}

on_both_clis!(release_zip_installs_from_a_packed_mirror, floor);
fn release_zip_installs_from_a_packed_mirror() {
    let cli = crate::harness::cli();
    let (dist, _) = released();
    let zip = format!("{NAME}_{PROVIDER_VERSION}_linux_amd64.zip");
    let zip_sha = sha256_hex(&std::fs::read(dist.join(&zip)).expect("zip"));

    // The packed layout of a filesystem mirror: the zip as released, under the CLI's host.
    let ws = Workspace::new(
        r#"
terraform {
  required_providers {
    talosboot = {
      source  = "talosboot/talosboot"
      version = "0.2.0"
    }
  }
}

provider "talosboot" {}
"#,
    );
    let mirror = ws.path().join("packed-mirror");
    let dir = mirror.join(format!("{}/talosboot/talosboot", cli.registry_host()));
    std::fs::create_dir_all(&dir).expect("mirror dir");
    std::fs::copy(dist.join(&zip), dir.join(&zip)).expect("copy zip");
    ws.write(
        "cli.tfrc",
        &format!(
            r#"provider_installation {{
  filesystem_mirror {{
    path    = "{}"
    include = ["{}"]
  }}
}}
"#,
            mirror.display(),
            cli.provider_address()
        ),
    );
    let init = ws.init();
    assert!(
        init.stdout
            .contains(&format!("talosboot/talosboot v{PROVIDER_VERSION}")),
        "{}",
        init.text()
    );
    let lock = ws.read(".terraform.lock.hcl");
    let binary = std::fs::read(debug_binary()).expect("debug binary");
    let expected = h1(&[(&format!("{NAME}_v{PROVIDER_VERSION}"), &binary)]);
    assert!(
        lock.contains(&expected),
        "the lock file should record {expected} (the zip's content):\n{lock}"
    );
    if lock.contains("zh:") {
        assert!(
            lock.contains(&format!("zh:{zip_sha}")),
            "zh: is the zip's SHA-256:\n{lock}"
        );
    }
    // The unpacked binary runs: the CLI reads the schema from it.
    let schema = ws.ok(&["providers", "schema", "-json"]).json();
    assert!(
        schema["provider_schemas"][cli.provider_address()]["resource_schemas"]
            .get("talosboot_cilium")
            .is_some(),
        "{schema}"
    );
}
