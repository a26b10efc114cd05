//! The two Helm majors an installer image may carry, and what each needs, decided without I/O.
//!
//! The installer Job learns the major from the binary (`helm version`), never from the image
//! reference: digests and mirrors carry no version. So the install's script holds one branch per
//! major, each with that major's flags ([`install_flags`]), and the branch for a major that must
//! not run (Helm 3 on a release Helm 4 applies server-side) is a refusal with its reason.
//!
//! What differs (field notes §10, read in `helm.sh/helm/v4` v4.3.2):
//! - Helm 4 renamed `--atomic` to `--rollback-on-failure` (the old name is a deprecated alias).
//! - Helm 4 installs by server-side apply (field manager `helm`) and records `apply_method`
//!   (`ssa`/`csa`) on each record; `upgrade --server-side=auto` follows the newest record (absent:
//!   client-side). Helm 3 always applies client-side and, when it upgrades, rewrites the previous
//!   record without `apply_method`: a release Helm 4 applied server-side would silently go back
//!   to client-side apply.
//! - Under server-side apply, `--take-ownership` conflicts with fields other managers own (Talos'
//!   `talos`, kubectl, Helm 3's client-side writes) unless `--force-conflicts`, which Helm 4
//!   refuses when the run applies client-side.

use std::fmt;

/// A Helm major talosboot speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HelmMajor {
    V3,
    V4,
}

impl HelmMajor {
    /// The major of `helm version --template '{{.Version}}'` output (`v3.18.4`, `v4.3.2`).
    pub fn of_version(version: &str) -> Option<HelmMajor> {
        let major = version.trim().trim_start_matches('v').split('.').next()?;
        match major {
            "3" => Some(HelmMajor::V3),
            "4" => Some(HelmMajor::V4),
            _ => None,
        }
    }

    /// The major an image reference's tag names (`alpine/helm:3.18.4`, `mirror/helm:v4.3.2`), or
    /// `None` when the tag is no Helm version (`latest`, a digest alone, another tool's version).
    /// Only a hint for the plan: the Job asks the binary.
    pub fn named_by_image(image: &str) -> Option<HelmMajor> {
        let without_digest = image.split('@').next().unwrap_or(image);
        let tag = match without_digest.rsplit_once(':') {
            Some((_, tag)) if !tag.contains('/') => tag,
            _ => return None,
        };
        let version = tag.trim_start_matches('v');
        // `3.18.4`, `4.3.2-alpine`; not a bare `3` nor `latest`.
        let numeric = version
            .split(['.', '-'])
            .take(2)
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        if !numeric || !version.contains('.') {
            return None;
        }
        HelmMajor::of_version(version)
    }
}

impl fmt::Display for HelmMajor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HelmMajor::V3 => "Helm 3",
            HelmMajor::V4 => "Helm 4",
        })
    }
}

/// How a revision's objects were applied, as Helm 4 records it (`apply_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyMethod {
    /// Client-side apply (three-way merge patches), Helm 3's only way.
    Csa,
    /// Server-side apply as field manager `helm`.
    Ssa,
}

impl ApplyMethod {
    /// The record's value; anything else (a future method) is `None`.
    pub fn parse(text: &str) -> Option<ApplyMethod> {
        match text {
            "csa" => Some(ApplyMethod::Csa),
            "ssa" => Some(ApplyMethod::Ssa),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ApplyMethod::Csa => "csa",
            ApplyMethod::Ssa => "ssa",
        }
    }
}

/// What the user chose (`job.apply_method`): `Auto` follows Helm 4's default (server-side on
/// install, the newest record's method on upgrade) and never lets Helm 3 switch a server-side
/// release back; `Csa`/`Ssa` force one method (`--server-side=false|true`), `Csa` being the
/// deliberate way to let a Helm 3 image upgrade such a release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApplyMethodChoice {
    #[default]
    Auto,
    Csa,
    Ssa,
}

impl ApplyMethodChoice {
    /// `auto`, `csa`, `ssa`; `None` for anything else.
    pub fn parse(text: &str) -> Option<ApplyMethodChoice> {
        match text {
            "auto" => Some(ApplyMethodChoice::Auto),
            "csa" => Some(ApplyMethodChoice::Csa),
            "ssa" => Some(ApplyMethodChoice::Ssa),
            _ => None,
        }
    }
}

/// The release as the install finds it: nothing (or only an uninstalled record), or a record and
/// the `apply_method` it carries (`None`: written by Helm 3, which Helm 4 treats as `csa`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Before {
    Nothing,
    Record(Option<ApplyMethod>),
}

/// The inputs of a run that differ by major.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MajorInputs {
    pub atomic: bool,
    pub take_ownership: bool,
    pub choice: ApplyMethodChoice,
}

/// Why a major must not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Helm 3 would upgrade a release whose newest record says `apply_method: ssa`, switching it
    /// to client-side apply without anyone asking.
    WouldSwitchToClientSide,
    /// `job.apply_method = "ssa"` with an image whose Helm has no server-side apply.
    NoServerSideApply,
}

impl Refusal {
    /// One line for the Job's log, naming the image and the release; starts with
    /// [`REFUSAL_MARK`], which the diagnosis table knows.
    pub fn message(self, image: &str, release: &str, revision: Option<i64>) -> String {
        match self {
            Refusal::WouldSwitchToClientSide => format!(
                "{REFUSAL_MARK} the installer image {image} carries Helm 3, and the newest record of release {release} (revision {}) says apply_method: ssa. Helm 3 applies client-side only and would switch the release to client-side apply for good.",
                revision.map_or_else(|| "?".to_owned(), |r| r.to_string())
            ),
            Refusal::NoServerSideApply => format!(
                "{REFUSAL_MARK} job.apply_method is \"ssa\", but the installer image {image} carries Helm 3, which has no server-side apply (release {release})."
            ),
        }
    }
}

/// The start of every refusal line the installer prints.
pub const REFUSAL_MARK: &str = "talosboot refused the install:";

/// Whether Helm 4 applies this run server-side (`--server-side=auto` on an upgrade follows the
/// newest record, an install applies server-side).
pub fn helm4_server_side(choice: ApplyMethodChoice, before: Before) -> bool {
    match (choice, before) {
        (ApplyMethodChoice::Ssa, _) => true,
        (ApplyMethodChoice::Csa, _) => false,
        (ApplyMethodChoice::Auto, Before::Nothing) => true,
        (ApplyMethodChoice::Auto, Before::Record(method)) => method == Some(ApplyMethod::Ssa),
    }
}

/// The flags of `helm upgrade --install` that differ by major, or why that major must not run.
pub fn install_flags(
    major: HelmMajor,
    inputs: MajorInputs,
    before: Before,
) -> Result<Vec<String>, Refusal> {
    let mut flags: Vec<String> = Vec::new();
    match major {
        HelmMajor::V3 => {
            match (inputs.choice, before) {
                (ApplyMethodChoice::Ssa, _) => return Err(Refusal::NoServerSideApply),
                (ApplyMethodChoice::Auto, Before::Record(Some(ApplyMethod::Ssa))) => {
                    return Err(Refusal::WouldSwitchToClientSide);
                }
                _ => {}
            }
            if inputs.take_ownership {
                flags.push("--take-ownership".into());
            }
            if inputs.atomic {
                flags.push("--atomic".into());
            }
        }
        HelmMajor::V4 => {
            let server_side = helm4_server_side(inputs.choice, before);
            flags.push(
                match inputs.choice {
                    ApplyMethodChoice::Auto => "--server-side=auto",
                    ApplyMethodChoice::Csa => "--server-side=false",
                    ApplyMethodChoice::Ssa => "--server-side=true",
                }
                .into(),
            );
            if inputs.take_ownership {
                flags.push("--take-ownership".into());
                // Adopting under server-side apply takes the fields other managers own (Helm 4
                // refuses the flag on a client-side run).
                if server_side {
                    flags.push("--force-conflicts".into());
                }
            }
            if inputs.atomic {
                flags.push("--rollback-on-failure".into());
            }
        }
    }
    Ok(flags)
}

/// One shell word, single-quoted.
pub fn sh_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The exit code of a refusal (Helm's own failures exit 1).
pub const REFUSAL_EXIT: i32 = 3;

/// The installer's script: ask the binary for its version, then run `common` (the `helm ...`
/// words both majors share) with that major's flags, or print the refusal. An unknown major is an
/// error naming the version. Every line a reader needs is echoed first (the major in use).
///
/// The script is built so that talos-sim's reading of it (`helm_needs_api`: the word after a
/// literal `helm`) sees the version probe as offline: the probe's `helm` is preceded by a
/// backquote.
pub fn install_script(
    common: &[String],
    v3: Result<Vec<String>, String>,
    v4: Result<Vec<String>, String>,
) -> String {
    let branch = |flags: Result<Vec<String>, String>| match flags {
        Ok(flags) => {
            let words: Vec<String> = common
                .iter()
                .chain(flags.iter())
                .map(|w| sh_quote(w))
                .collect();
            format!("exec {}", words.join(" "))
        }
        Err(message) => format!("echo {} >&2; exit {REFUSAL_EXIT}", sh_quote(&message)),
    };
    format!(
        "v=`helm version --template '{{{{.Version}}}}'` || exit 1; echo \"talosboot: the installer runs Helm $v\"; case \"$v\" in v3.*) {};; v4.*) {};; *) echo \"talosboot: the installer image's Helm reports version '$v'; talosboot speaks Helm 3 and 4\" >&2; exit 1;; esac",
        branch(v3),
        branch(v4)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ApplyMethod::*;
    use ApplyMethodChoice as C;

    #[test]
    fn the_major_comes_from_the_version_the_binary_prints() {
        assert_eq!(HelmMajor::of_version("v3.18.4"), Some(HelmMajor::V3));
        assert_eq!(HelmMajor::of_version("v4.3.2\n"), Some(HelmMajor::V4));
        assert_eq!(HelmMajor::of_version("v5.0.0"), None);
        assert_eq!(HelmMajor::of_version(""), None);
    }

    #[test]
    fn an_image_tag_only_hints_at_the_major() {
        for (image, major) in [
            ("alpine/helm:3.18.4", Some(HelmMajor::V3)),
            ("alpine/helm:4.3.2", Some(HelmMajor::V4)),
            ("mirror.local:5000/alpine/helm:v4.2.3", Some(HelmMajor::V4)),
            ("alpine/helm:3.18.4@sha256:abc", Some(HelmMajor::V3)),
            ("example/helm:4.3.2-alpine", Some(HelmMajor::V4)),
            ("alpine/helm@sha256:abc", None),
            ("alpine/helm:latest", None),
            ("alpine/helm", None),
            ("alpine/helm:3", None),
            ("mirror.local:5000/helm", None),
        ] {
            assert_eq!(HelmMajor::named_by_image(image), major, "{image}");
        }
    }

    #[test]
    fn each_major_gets_its_own_flag_names() {
        let all = MajorInputs {
            atomic: true,
            take_ownership: true,
            choice: C::Auto,
        };
        assert_eq!(
            install_flags(HelmMajor::V3, all, Before::Nothing).unwrap(),
            ["--take-ownership", "--atomic"]
        );
        assert_eq!(
            install_flags(HelmMajor::V4, all, Before::Nothing).unwrap(),
            [
                "--server-side=auto",
                "--take-ownership",
                "--force-conflicts",
                "--rollback-on-failure"
            ]
        );
        let none = MajorInputs::default();
        assert!(
            install_flags(HelmMajor::V3, none, Before::Nothing)
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            install_flags(HelmMajor::V4, none, Before::Nothing).unwrap(),
            ["--server-side=auto"]
        );
    }

    #[test]
    fn force_conflicts_only_when_adopting_under_server_side_apply() {
        // (choice, before, take_ownership) -> whether Helm 4 gets --force-conflicts
        let table = [
            (C::Auto, Before::Nothing, true, true),
            (C::Auto, Before::Nothing, false, false),
            (C::Auto, Before::Record(Some(Ssa)), true, true),
            // Helm 4 upgrades a Helm 3 or `csa` release client-side, where it refuses the flag.
            (C::Auto, Before::Record(None), true, false),
            (C::Auto, Before::Record(Some(Csa)), true, false),
            (C::Csa, Before::Nothing, true, false),
            (C::Ssa, Before::Record(None), true, true),
            (C::Ssa, Before::Record(None), false, false),
        ];
        for (choice, before, take_ownership, forced) in table {
            let inputs = MajorInputs {
                atomic: false,
                take_ownership,
                choice,
            };
            let flags = install_flags(HelmMajor::V4, inputs, before).unwrap();
            assert_eq!(
                flags.contains(&"--force-conflicts".to_owned()),
                forced,
                "{choice:?} {before:?} {take_ownership}: {flags:?}"
            );
        }
    }

    #[test]
    fn helm_3_never_switches_a_server_side_release_unasked() {
        let table = [
            (C::Auto, Before::Nothing, Ok(())),
            (C::Auto, Before::Record(None), Ok(())),
            (C::Auto, Before::Record(Some(Csa)), Ok(())),
            (
                C::Auto,
                Before::Record(Some(Ssa)),
                Err(Refusal::WouldSwitchToClientSide),
            ),
            // The deliberate switch.
            (C::Csa, Before::Record(Some(Ssa)), Ok(())),
            (C::Ssa, Before::Nothing, Err(Refusal::NoServerSideApply)),
            (
                C::Ssa,
                Before::Record(Some(Ssa)),
                Err(Refusal::NoServerSideApply),
            ),
        ];
        for (choice, before, expected) in table {
            let inputs = MajorInputs {
                choice,
                ..Default::default()
            };
            assert_eq!(
                install_flags(HelmMajor::V3, inputs, before).map(|_| ()),
                expected,
                "{choice:?} {before:?}"
            );
            // Helm 4 runs whatever the record says.
            assert!(install_flags(HelmMajor::V4, inputs, before).is_ok());
        }
    }

    #[test]
    fn helm_4_follows_the_record_unless_told_otherwise() {
        let table = [
            (C::Auto, Before::Nothing, true),
            (C::Auto, Before::Record(None), false),
            (C::Auto, Before::Record(Some(Csa)), false),
            (C::Auto, Before::Record(Some(Ssa)), true),
            (C::Csa, Before::Record(Some(Ssa)), false),
            (C::Ssa, Before::Record(Some(Csa)), true),
        ];
        for (choice, before, server_side) in table {
            assert_eq!(
                helm4_server_side(choice, before),
                server_side,
                "{choice:?} {before:?}"
            );
        }
    }

    #[test]
    fn the_script_asks_the_binary_and_branches_by_major() {
        let common: Vec<String> = ["helm", "upgrade", "--install", "it's", "chart"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        let script = install_script(
            &common,
            Err("talosboot refused the install: no".into()),
            Ok(vec!["--server-side=auto".into()]),
        );
        assert!(
            script.starts_with("v=`helm version --template '{{.Version}}'` || exit 1;"),
            "{script}"
        );
        assert!(script.contains(
            "v4.*) exec 'helm' 'upgrade' '--install' 'it'\\''s' 'chart' '--server-side=auto';;"
        ));
        assert!(script.contains("v3.*) echo 'talosboot refused the install: no' >&2; exit 3;;"));
        assert!(script.contains("*) echo"), "an unknown major is an error");
    }

    #[test]
    fn refusals_name_the_image_and_the_record() {
        let m = Refusal::WouldSwitchToClientSide.message(
            "alpine/helm:3.18.4",
            "kube-system/cilium",
            Some(4),
        );
        assert!(m.starts_with(REFUSAL_MARK));
        assert!(m.contains("alpine/helm:3.18.4") && m.contains("kube-system/cilium (revision 4)"));
        assert!(m.contains("apply_method: ssa"));
    }
}
