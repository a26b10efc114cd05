//! The repository carries the license `Cargo.toml` declares, and `scripts/release` refuses to
//! build a release whose `LICENSE` is not that license's text (a registry lists no provider
//! without one; a company reads the file, not `Cargo.toml`).
//!
//! The release script is run in a scratch copy of the checkout (the script, `Cargo.toml` and a
//! `LICENSE` of the test's choosing) with `TALOSBOOT_RELEASE_BINARY`, which packs a given file
//! instead of building: the check runs before anything is built or written.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A scratch checkout with `license` as its `LICENSE` (none when `None`) and `cargo_toml` as its
/// `Cargo.toml`; runs `scripts/release` there.
fn release_with(license: Option<&str>, cargo_toml: &str) -> (tempfile::TempDir, Output) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("scripts")).expect("mkdir");
    std::fs::copy(
        root().join("scripts/release"),
        dir.path().join("scripts/release"),
    )
    .expect("copy scripts/release");
    std::fs::write(dir.path().join("Cargo.toml"), cargo_toml).expect("write Cargo.toml");
    if let Some(text) = license {
        std::fs::write(dir.path().join("LICENSE"), text).expect("write LICENSE");
    }
    let binary: PathBuf = dir.path().join("binary");
    std::fs::write(&binary, b"#!/bin/sh\n").expect("write binary");
    let out = Command::new("bash")
        .arg(dir.path().join("scripts/release"))
        .env("TALOSBOOT_RELEASE_BINARY", &binary)
        .env("TALOSBOOT_RELEASE_DIST", dir.path().join("dist"))
        .env("SOURCE_DATE_EPOCH", "315532800")
        .output()
        .expect("run bash scripts/release");
    (dir, out)
}

fn crate_toml() -> String {
    std::fs::read_to_string(root().join("Cargo.toml")).expect("Cargo.toml")
}

fn license() -> String {
    std::fs::read_to_string(root().join("LICENSE")).expect("the repository has a LICENSE file")
}

#[test]
fn the_license_file_is_the_mpl_2_0_cargo_declares() {
    let cargo = crate_toml();
    assert!(
        cargo.contains("license = \"MPL-2.0\""),
        "Cargo.toml no longer says MPL-2.0: update this test and LICENSE together"
    );
    let text = license();
    assert!(
        text.starts_with("Mozilla Public License Version 2.0\n"),
        "{}",
        text.lines().next().unwrap_or_default()
    );
    // The whole text, not a stub: its last section and the exhibits are there.
    for part in [
        "10.4. Distributing Source Code Form that is Incompatible With Secondary",
        "Exhibit A - Source Code Form License Notice",
        "Exhibit B - \"Incompatible With Secondary Licenses\" Notice",
    ] {
        assert!(text.contains(part), "LICENSE lacks {part:?}");
    }
}

#[test]
fn release_builds_with_the_license_cargo_declares() {
    let (dir, out) = release_with(Some(&license()), &crate_toml());
    assert!(
        out.status.success(),
        "scripts/release failed with the repository's LICENSE:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let version = crate_toml()
        .lines()
        .skip_while(|l| *l != "[package]")
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("[package] version")
        .to_owned();
    let zip = dir.path().join(format!(
        "dist/terraform-provider-talosboot_{version}_linux_amd64.zip"
    ));
    assert!(zip.exists(), "{} was not written", zip.display());
}

#[test]
fn release_refuses_a_license_file_that_is_not_the_declared_license() {
    // Another license's text, an edited MPL text, and no file at all: each is refused before
    // anything is built, naming the problem.
    let edited = license().replacen("Mozilla Foundation", "Someone Else", 1);
    let cases: [(Option<&str>, &str); 3] = [
        (
            Some("MIT License\n\nPermission is hereby granted...\n"),
            "LICENSE is not the canonical MPL-2.0 text",
        ),
        (Some(&edited), "LICENSE is not the canonical MPL-2.0 text"),
        (None, "no LICENSE file, though Cargo.toml says MPL-2.0"),
    ];
    for (text, expected) in cases {
        let (dir, out) = release_with(text, &crate_toml());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(expected), "{stderr}");
        assert!(
            !dir.path().join("dist").exists(),
            "a refused release wrote dist/"
        );
    }
}

#[test]
fn release_refuses_a_license_it_has_no_text_for() {
    // Cargo.toml changed to another license while LICENSE stayed MPL: the script does not guess.
    let cargo = crate_toml().replacen("license = \"MPL-2.0\"", "license = \"Apache-2.0\"", 1);
    let (_dir, out) = release_with(Some(&license()), &cargo);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("Cargo.toml's license Apache-2.0 has no known text here"),
        "{stderr}"
    );
}
