//! [`ReleaseStatus`]: a Helm release revision's `info.status` as an enum, so that every decision
//! on it (install, refresh, plan, drift) matches a variant instead of comparing text.

use serde::Deserialize;

/// The status of a release revision, as Helm writes it in `info.status`. Decisions are made on
/// this, never on the text; an unknown status (a newer Helm's) is kept as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReleaseStatus {
    Deployed,
    Superseded,
    Failed,
    Uninstalled,
    Uninstalling,
    PendingInstall,
    PendingUpgrade,
    PendingRollback,
    /// A status this provider does not know (or none), as written.
    Other(String),
}

impl Default for ReleaseStatus {
    fn default() -> Self {
        ReleaseStatus::Other(String::new())
    }
}

impl ReleaseStatus {
    const NAMES: [(&'static str, ReleaseStatus); 8] = [
        ("deployed", ReleaseStatus::Deployed),
        ("superseded", ReleaseStatus::Superseded),
        ("failed", ReleaseStatus::Failed),
        ("uninstalled", ReleaseStatus::Uninstalled),
        ("uninstalling", ReleaseStatus::Uninstalling),
        ("pending-install", ReleaseStatus::PendingInstall),
        ("pending-upgrade", ReleaseStatus::PendingUpgrade),
        ("pending-rollback", ReleaseStatus::PendingRollback),
    ];

    /// Helm's spelling.
    pub fn as_str(&self) -> &str {
        match self {
            ReleaseStatus::Other(s) => s,
            known => Self::NAMES
                .iter()
                .find(|(_, s)| s == known)
                .map_or("", |(name, _)| name),
        }
    }

    /// An install, upgrade or rollback that never finished (`pending-*`): the release is locked.
    pub fn is_pending(&self) -> bool {
        matches!(
            self,
            ReleaseStatus::PendingInstall
                | ReleaseStatus::PendingUpgrade
                | ReleaseStatus::PendingRollback
        )
    }

    /// A release that is live: deployed now, or an older revision of one.
    pub fn is_live(&self) -> bool {
        matches!(self, ReleaseStatus::Deployed | ReleaseStatus::Superseded)
    }
}

impl From<&str> for ReleaseStatus {
    fn from(s: &str) -> Self {
        match Self::NAMES.iter().find(|(name, _)| *name == s) {
            Some((_, status)) => status.clone(),
            None => ReleaseStatus::Other(s.to_owned()),
        }
    }
}

impl std::fmt::Display for ReleaseStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for ReleaseStatus {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl serde::Serialize for ReleaseStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ReleaseStatus {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(|s| ReleaseStatus::from(s.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip_and_unknown_ones_are_kept() {
        for word in [
            "deployed",
            "superseded",
            "failed",
            "uninstalled",
            "uninstalling",
            "pending-install",
            "pending-upgrade",
            "pending-rollback",
            "",
            "newer",
        ] {
            assert_eq!(ReleaseStatus::from(word).as_str(), word);
        }
        assert!(ReleaseStatus::from("pending-upgrade").is_pending());
        assert!(!ReleaseStatus::Failed.is_pending());
        assert!(ReleaseStatus::Superseded.is_live());
        assert_eq!(ReleaseStatus::Deployed, "deployed");
    }
}
