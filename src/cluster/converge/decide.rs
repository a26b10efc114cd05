//! The install decision, pure: given what the cluster has (the release record's status, its
//! fingerprint, who manages its workloads) and what is wanted, whether an apply refuses, repairs
//! (unlocking a stuck record), upgrades, leaves the release as it is, or leaves it to the tool that
//! manages it. Every chart install decides here, through [`super::converge`]: `talosboot_cilium`,
//! `talosboot_helm_release`, the Flux Operator release and the Flux prerequisite charts.

use crate::cluster::helm::release::ReleaseStatus;
use crate::cluster::ownership::Manager;

/// What an apply does about a release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// A create found a live release of that name (deployed, or superseded by one): talosboot
    /// does not take over a release by creating it (import it instead).
    Refuse,
    /// A create found a release an earlier run left (failed, pending): upgrade it in place.
    Repair,
    /// `helm upgrade --install`: nothing there yet, or something changed.
    Upgrade,
    /// Deployed from this version with these values and chart content: no Job runs.
    Unchanged,
    /// Another tool manages the release now (its workloads carry that tool's marks, read fresh
    /// at apply): no Job runs whatever changed, the configuration is only recorded.
    LeaveToManager,
}

/// What identifies an install: an upgrade to the same fingerprint changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Fingerprint<'a> {
    /// The chart version (`v1.18.4` and `1.18.4` are one version).
    pub version: &'a str,
    /// A hash of the values (salted or not: compared only with a hash made alike).
    pub values_sha256: Option<&'a str>,
    /// A digest of chart content the version does not pin (a local chart directory); `None`
    /// where there is nothing to compare.
    pub content_digest: Option<&'a str>,
}

pub use crate::cluster::helm::chart_version::same_version;

/// The decision. `current` is the status of the release record (an uninstalled one counts as
/// none); `prior` what the last apply installed (`None` on a create); `desired` what this apply
/// installs; `manager` the tool whose marks the release's workloads carry.
pub fn decide(
    current: Option<&ReleaseStatus>,
    prior: Option<&Fingerprint>,
    desired: &Fingerprint,
    manager: Option<&Manager>,
) -> Decision {
    let current = current.filter(|s| **s != ReleaseStatus::Uninstalled);
    if prior.is_some() && current.is_some() && manager.is_some() {
        return Decision::LeaveToManager;
    }
    let Some(prior) = prior else {
        return match current {
            Some(s) if s.is_live() => Decision::Refuse,
            Some(_) => Decision::Repair,
            None => Decision::Upgrade,
        };
    };
    let unchanged = prior.values_sha256 == desired.values_sha256
        && same_version(prior.version, desired.version)
        && (prior.content_digest.is_none() || prior.content_digest == desired.content_digest)
        && current == Some(&ReleaseStatus::Deployed);
    match unchanged {
        true => Decision::Unchanged,
        false => Decision::Upgrade,
    }
}

/// What a run wants of a release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want<'a> {
    /// A resource that keeps the release in its state: `prior` is what its last apply installed
    /// (`None` on a create, which never takes over a live release), `desired` what it installs now.
    Since {
        prior: Option<Fingerprint<'a>>,
        desired: Fingerprint<'a>,
    },
    /// A bootstrap that keeps no state of the release (the Flux Operator, the Flux prerequisite
    /// charts): the record stands for the last install, so an existing release is upgraded to
    /// `desired` rather than refused. An empty `desired.version` means whichever is installed.
    Record(Fingerprint<'a>),
    /// A run that was not asked to change the release: whatever is installed, repaired when it is
    /// gone, failed, stuck or missing a workload.
    AsInstalled,
}

/// What the cluster has of a release, as [`decide_wanted`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Found<'a> {
    /// The newest record's status (`None`: no record).
    pub status: Option<&'a ReleaseStatus>,
    /// What the newest record installed (its chart version and values hash).
    pub record: Option<Fingerprint<'a>>,
    /// The tool whose marks the release's workloads carry.
    pub manager: Option<&'a Manager>,
    /// A workload the caller observes is gone while the record says deployed: an upgrade
    /// recreates it, where "unchanged" would leave it gone.
    pub workload_missing: bool,
}

/// The decision for a [`Want`], from what was [`Found`]: [`decide`] with the prior install the
/// want names.
pub fn decide_wanted(want: &Want, found: &Found) -> Decision {
    let record = found.record.as_ref();
    let decided = match want {
        Want::Since { prior, desired } => {
            return decide(found.status, prior.as_ref(), desired, found.manager);
        }
        // A bootstrap hands over what another tool manages, with or without a record (Flux's
        // helm-controller may keep the release under a record of its own): never touched again.
        _ if found.manager.is_some() => Decision::LeaveToManager,
        Want::Record(desired) => {
            let version = match desired.version {
                "" => record.map_or("", |r| r.version),
                v => v,
            };
            let desired = Fingerprint {
                version,
                ..*desired
            };
            decide(found.status, record, &desired, found.manager)
        }
        Want::AsInstalled => {
            let desired = record.copied().unwrap_or_default();
            decide(found.status, record, &desired, found.manager)
        }
    };
    match decided {
        Decision::Unchanged if found.workload_missing => Decision::Upgrade,
        d => d,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ReleaseStatus::*;

    const WANTED: Fingerprint = Fingerprint {
        version: "1.18.4",
        values_sha256: Some("h1"),
        content_digest: None,
    };

    fn with(
        version: &'static str,
        hash: &'static str,
        digest: Option<&'static str>,
    ) -> Fingerprint<'static> {
        Fingerprint {
            version,
            values_sha256: Some(hash),
            content_digest: digest,
        }
    }

    #[test]
    fn a_create_refuses_a_live_release_and_repairs_a_stuck_one() {
        let table: &[(Option<ReleaseStatus>, Decision)] = &[
            (None, Decision::Upgrade),
            (Some(Uninstalled), Decision::Upgrade),
            (Some(Deployed), Decision::Refuse),
            (Some(Superseded), Decision::Refuse),
            (Some(Failed), Decision::Repair),
            (Some(PendingInstall), Decision::Repair),
            (Some(PendingUpgrade), Decision::Repair),
            (Some(Uninstalling), Decision::Repair),
            (Some(Other("odd".into())), Decision::Repair),
        ];
        for (status, expected) in table {
            assert_eq!(
                decide(status.as_ref(), None, &WANTED, None),
                *expected,
                "{status:?}"
            );
        }
    }

    #[test]
    fn a_release_another_tool_manages_is_left_to_it_whatever_changed() {
        let argo = Manager::ArgoCd {
            application: "cilium".into(),
        };
        let changed = with("1.18.5", "h2", None);
        let table: &[(&str, Option<ReleaseStatus>, Option<&Fingerprint>, Decision)] = &[
            (
                "an upgrade",
                Some(Deployed),
                Some(&changed),
                Decision::LeaveToManager,
            ),
            (
                "nothing changed",
                Some(Deployed),
                Some(&WANTED),
                Decision::LeaveToManager,
            ),
            (
                "a failed release",
                Some(Failed),
                Some(&changed),
                Decision::LeaveToManager,
            ),
            // A create never takes a release over, managed or not.
            ("a create", Some(Deployed), None, Decision::Refuse),
            // Nothing left to manage: the release is gone, so it is installed again.
            ("gone", None, Some(&changed), Decision::Upgrade),
            (
                "uninstalled",
                Some(Uninstalled),
                Some(&changed),
                Decision::Upgrade,
            ),
        ];
        for (why, status, prior, expected) in table {
            assert_eq!(
                decide(status.as_ref(), *prior, &WANTED, Some(&argo)),
                *expected,
                "{why}"
            );
        }
    }

    #[test]
    fn an_update_is_unchanged_only_when_deployed_with_the_same_fingerprint() {
        let table: &[(&str, Option<ReleaseStatus>, Fingerprint, Decision)] = &[
            ("same", Some(Deployed), WANTED, Decision::Unchanged),
            (
                "spelling",
                Some(Deployed),
                with("v1.18.4", "h1", None),
                Decision::Unchanged,
            ),
            (
                "version",
                Some(Deployed),
                with("1.18.5", "h1", None),
                Decision::Upgrade,
            ),
            (
                "values",
                Some(Deployed),
                with("1.18.4", "h2", None),
                Decision::Upgrade,
            ),
            ("failed", Some(Failed), WANTED, Decision::Upgrade),
            ("pending", Some(PendingUpgrade), WANTED, Decision::Upgrade),
            ("superseded", Some(Superseded), WANTED, Decision::Upgrade),
            ("gone", None, WANTED, Decision::Upgrade),
            ("uninstalled", Some(Uninstalled), WANTED, Decision::Upgrade),
        ];
        for (why, status, prior, expected) in table {
            assert_eq!(
                decide(status.as_ref(), Some(prior), &WANTED, None),
                *expected,
                "{why}"
            );
        }
    }

    #[test]
    fn chart_content_counts_only_where_the_prior_install_recorded_it() {
        let desired = with("1.0.0", "h1", Some("d2"));
        let decided = |prior: Fingerprint| decide(Some(&Deployed), Some(&prior), &desired, None);
        assert_eq!(decided(with("1.0.0", "h1", Some("d1"))), Decision::Upgrade);
        assert_eq!(
            decided(with("1.0.0", "h1", Some("d2"))),
            Decision::Unchanged
        );
        assert_eq!(decided(with("1.0.0", "h1", None)), Decision::Unchanged);
    }

    #[test]
    fn an_unknown_hash_on_both_sides_is_no_change_of_values() {
        let none = Fingerprint {
            version: "1",
            values_sha256: None,
            content_digest: None,
        };
        assert_eq!(
            decide(Some(&Deployed), Some(&none), &none, None),
            Decision::Unchanged
        );
    }

    #[test]
    fn a_bootstrap_upgrades_from_the_record_and_repairs_what_it_did_not_change() {
        let argo = Manager::ArgoCd {
            application: "flux".into(),
        };
        let record = with("1.18.4", "h1", None);
        let found = |status: Option<&'static ReleaseStatus>, missing: bool| Found {
            status,
            record: status.map(|_| record),
            manager: None,
            workload_missing: missing,
        };
        let latest = with("", "h1", None);
        let other_values = with("1.18.4", "h2", None);
        let table: &[(&str, Want, Found, Decision)] = &[
            (
                "absent",
                Want::Record(WANTED),
                found(None, false),
                Decision::Upgrade,
            ),
            (
                "same",
                Want::Record(WANTED),
                found(Some(&Deployed), false),
                Decision::Unchanged,
            ),
            (
                "latest is what runs",
                Want::Record(latest),
                found(Some(&Deployed), false),
                Decision::Unchanged,
            ),
            (
                "values changed",
                Want::Record(other_values),
                found(Some(&Deployed), false),
                Decision::Upgrade,
            ),
            (
                "an existing release is taken over, never refused",
                Want::Record(other_values),
                found(Some(&Superseded), false),
                Decision::Upgrade,
            ),
            (
                "stuck: unlocked and upgraded",
                Want::Record(WANTED),
                found(Some(&PendingInstall), false),
                Decision::Upgrade,
            ),
            (
                "workload deleted",
                Want::Record(WANTED),
                found(Some(&Deployed), true),
                Decision::Upgrade,
            ),
            (
                "as installed",
                Want::AsInstalled,
                found(Some(&Deployed), false),
                Decision::Unchanged,
            ),
            (
                "as installed, gone",
                Want::AsInstalled,
                found(None, false),
                Decision::Upgrade,
            ),
            (
                "as installed, failed",
                Want::AsInstalled,
                found(Some(&Failed), false),
                Decision::Upgrade,
            ),
            (
                "as installed, uninstalled",
                Want::AsInstalled,
                found(Some(&Uninstalled), false),
                Decision::Upgrade,
            ),
            (
                "as installed, workload deleted",
                Want::AsInstalled,
                found(Some(&Deployed), true),
                Decision::Upgrade,
            ),
            (
                "managed",
                Want::Record(other_values),
                Found {
                    manager: Some(&argo),
                    ..found(Some(&Deployed), false)
                },
                Decision::LeaveToManager,
            ),
            (
                "managed, as installed",
                Want::AsInstalled,
                Found {
                    manager: Some(&argo),
                    ..found(Some(&Failed), true)
                },
                Decision::LeaveToManager,
            ),
            (
                "managed, no record",
                Want::Record(WANTED),
                Found {
                    manager: Some(&argo),
                    ..found(None, false)
                },
                Decision::LeaveToManager,
            ),
            (
                "a create refuses",
                Want::Since {
                    prior: None,
                    desired: WANTED,
                },
                found(Some(&Deployed), false),
                Decision::Refuse,
            ),
            (
                "a create repairs",
                Want::Since {
                    prior: None,
                    desired: WANTED,
                },
                found(Some(&Failed), false),
                Decision::Repair,
            ),
            (
                "an update",
                Want::Since {
                    prior: Some(other_values),
                    desired: WANTED,
                },
                found(Some(&Deployed), false),
                Decision::Upgrade,
            ),
        ];
        for (why, want, found, expected) in table {
            assert_eq!(decide_wanted(want, found), *expected, "{why}");
        }
    }
}
