//! Cilium's upgrade path as a pure rule, beside the other version tables ([`super::versions`]).
//! From the upgrade guide (docs.cilium.io, operations/upgrade, 1.19 and 1.20): "The only tested
//! rollback and upgrade path is between consecutive minor releases", and "Always update to the
//! latest patch release of your current version before attempting an upgrade".
//! - [`upgrade_path`]: what a move from the running chart version to the wanted one is;
//! - [`latest_patch`]: the newest release of a minor among the versions a repository lists;
//! - [`steps`]: the applies, one minor at a time, that reach a version the rule refuses.

use crate::cluster::helm::chart_version::ChartVersion;

/// What moving from the running version to the wanted one is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpgradePath {
    /// The same version: no upgrade.
    Same,
    /// Another patch of the same minor (either way).
    Patch,
    /// One minor up: the tested path.
    NextMinor,
    /// One minor down: the tested rollback.
    PreviousMinor,
    /// More than one minor up: each minor in between must be applied first.
    SkipsMinors { between: Vec<(u64, u64)> },
    /// More than one minor down.
    DowngradeTooFar { between: Vec<(u64, u64)> },
    /// Another major: outside the rule (Cilium has had one major since 1.0).
    OtherMajor,
}

impl UpgradePath {
    /// Whether the guide refuses it.
    pub fn refused(&self) -> bool {
        matches!(
            self,
            UpgradePath::SkipsMinors { .. }
                | UpgradePath::DowngradeTooFar { .. }
                | UpgradePath::OtherMajor
        )
    }

    /// Whether it crosses into another minor (the latest-patch rule then applies).
    pub fn changes_minor(&self) -> bool {
        !matches!(self, UpgradePath::Same | UpgradePath::Patch)
    }
}

/// The rule, pure.
pub fn upgrade_path(running: &ChartVersion, wanted: &ChartVersion) -> UpgradePath {
    if running == wanted {
        return UpgradePath::Same;
    }
    let Some(delta) = running.minors_to(wanted) else {
        return UpgradePath::OtherMajor;
    };
    let between = |from: u64, to: u64| -> Vec<(u64, u64)> {
        (from + 1..to).map(|m| (running.major, m)).collect()
    };
    match delta {
        0 => UpgradePath::Patch,
        1 => UpgradePath::NextMinor,
        -1 => UpgradePath::PreviousMinor,
        d if d > 1 => UpgradePath::SkipsMinors {
            between: between(running.minor, wanted.minor),
        },
        _ => UpgradePath::DowngradeTooFar {
            between: between(wanted.minor, running.minor)
                .into_iter()
                .rev()
                .collect(),
        },
    }
}

/// The newest release (no pre-release) of `major.minor` among `known`.
pub fn latest_patch<'a>(
    known: impl IntoIterator<Item = &'a ChartVersion>,
    (major, minor): (u64, u64),
) -> Option<&'a ChartVersion> {
    known
        .into_iter()
        .filter(|v| v.major == major && v.minor == minor && !v.is_prerelease())
        .max()
}

/// When moving off the running minor, the newer patch of it the repository has (the guide's
/// "latest patch first"); `None` when the running version is its minor's newest, or nothing is
/// known.
pub fn newer_patch_first<'a>(
    running: &ChartVersion,
    path: &UpgradePath,
    known: &'a [ChartVersion],
) -> Option<&'a ChartVersion> {
    if !path.changes_minor() || *path == UpgradePath::PreviousMinor {
        return None;
    }
    latest_patch(known, (running.major, running.minor)).filter(|latest| *latest > running)
}

/// The applies that reach `wanted`, one minor at a time: `1.19.7`, then `1.20.2`. A minor in
/// between is its newest known patch, or `1.19.x` when the repository could not be read.
pub fn steps(between: &[(u64, u64)], wanted: &ChartVersion, known: &[ChartVersion]) -> Vec<String> {
    between
        .iter()
        .map(|line| match latest_patch(known, *line) {
            Some(v) => v.to_string(),
            None => format!("{}.{}.x", line.0, line.1),
        })
        .chain([wanted.to_string()])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> ChartVersion {
        ChartVersion::parse(s).expect(s)
    }

    #[test]
    fn one_minor_at_a_time_up_and_down() {
        let table: &[(&str, &str, UpgradePath)] = &[
            ("1.19.7", "1.19.7", UpgradePath::Same),
            ("1.19.6", "1.19.7", UpgradePath::Patch),
            ("1.19.7", "1.19.6", UpgradePath::Patch),
            ("1.19.7", "1.20.2", UpgradePath::NextMinor),
            ("1.19.7", "1.20.0-rc.1", UpgradePath::NextMinor),
            ("1.20.2", "1.19.7", UpgradePath::PreviousMinor),
            (
                "1.18.4",
                "1.20.2",
                UpgradePath::SkipsMinors {
                    between: vec![(1, 19)],
                },
            ),
            (
                "1.16.3",
                "1.20.2",
                UpgradePath::SkipsMinors {
                    between: vec![(1, 17), (1, 18), (1, 19)],
                },
            ),
            (
                "1.20.2",
                "1.18.4",
                UpgradePath::DowngradeTooFar {
                    between: vec![(1, 19)],
                },
            ),
            ("1.20.2", "2.0.0", UpgradePath::OtherMajor),
        ];
        for (running, wanted, expected) in table {
            let got = upgrade_path(&v(running), &v(wanted));
            assert_eq!(&got, expected, "{running} -> {wanted}");
            let refused = matches!(
                expected,
                UpgradePath::SkipsMinors { .. }
                    | UpgradePath::DowngradeTooFar { .. }
                    | UpgradePath::OtherMajor
            );
            assert_eq!(got.refused(), refused, "{running} -> {wanted}");
        }
    }

    #[test]
    fn the_steps_name_the_newest_patch_of_each_minor_in_between() {
        let known: Vec<ChartVersion> = [
            "1.18.3",
            "1.18.4",
            "1.19.6",
            "1.19.7",
            "1.20.0-rc.1",
            "1.20.1",
            "1.20.2",
        ]
        .iter()
        .map(|s| v(s))
        .collect();
        let UpgradePath::SkipsMinors { between } = upgrade_path(&v("1.18.4"), &v("1.20.2")) else {
            panic!("a skip");
        };
        assert_eq!(steps(&between, &v("1.20.2"), &known), ["1.19.7", "1.20.2"]);
        assert_eq!(
            steps(&between, &v("1.20.2"), &[]),
            ["1.19.x", "1.20.2"],
            "the repository could not be read"
        );
        assert_eq!(
            latest_patch(&known, (1, 20)).map(ToString::to_string),
            Some("1.20.2".into()),
            "a pre-release is never the latest patch"
        );
    }

    #[test]
    fn moving_off_a_minor_wants_its_newest_patch_first() {
        let known: Vec<ChartVersion> = ["1.19.6", "1.19.7", "1.20.2"]
            .iter()
            .map(|s| v(s))
            .collect();
        let newer = |running: &str, wanted: &str| {
            let (r, w) = (v(running), v(wanted));
            newer_patch_first(&r, &upgrade_path(&r, &w), &known).map(ToString::to_string)
        };
        assert_eq!(newer("1.19.6", "1.20.2"), Some("1.19.7".into()));
        assert_eq!(newer("1.19.7", "1.20.2"), None, "already the newest");
        assert_eq!(
            newer("1.19.6", "1.19.7"),
            None,
            "a patch upgrade is that step"
        );
        assert_eq!(
            newer("1.20.2", "1.19.6"),
            None,
            "a rollback goes to what ran"
        );
        assert_eq!(
            newer_patch_first(&v("1.19.6"), &UpgradePath::NextMinor, &[]),
            None,
            "nothing known, nothing said"
        );
    }
}
