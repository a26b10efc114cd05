//! Inputs that take one of a few words (`rbac`, `deletion_policy`, `job.apply_method`,
//! `job.image.pull_policy`) as enums: decided on by
//! variant, never by comparing strings. A word outside the list decodes as `Other` so that
//! validation can name it on its attribute.

/// Declares a string enum: its variants with their words, `Other(String)` for anything else,
/// `as_str`, `From<&str>` and serde as the word.
macro_rules! choice {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $word:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
            /// A word outside the list (validation refuses it).
            Other(String),
        }

        impl $name {
            /// The words this input takes, in the order messages list them.
            pub const WORDS: &'static [&'static str] = &[$($word),+];

            pub fn as_str(&self) -> &str {
                match self {
                    $($name::$variant => $word,)+
                    $name::Other(s) => s,
                }
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                match s {
                    $($word => $name::$variant,)+
                    other => $name::Other(other.to_owned()),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                String::deserialize(d).map(|s| $name::from(s.as_str()))
            }
        }
    };
}

pub(crate) use choice;

choice! {
    /// `deletion_policy` of a chart-installing resource: what destroy does with the release.
    DeletionPolicy {
        /// Destroy uninstalls the release (the default).
        Uninstall = "uninstall",
        /// Destroy only forgets it.
        Keep = "keep",
    }
}

choice! {
    /// `job.apply_method`: how the installer applies a chart's objects, as Helm 4 records it on
    /// each revision.
    JobApplyMethod {
        /// Helm 4's default: server-side on install, the newest record's method on upgrade; never
        /// lets Helm 3 switch a server-side release back.
        Auto = "auto",
        /// Client-side apply (`--server-side=false`).
        Csa = "csa",
        /// Server-side apply (`--server-side=true`).
        Ssa = "ssa",
    }
}

impl JobApplyMethod {
    /// The engine's choice; a word outside the list (refused at validate) is `auto`.
    pub fn choice(&self) -> crate::cluster::helm::major::ApplyMethodChoice {
        use crate::cluster::helm::major::ApplyMethodChoice;
        match self {
            JobApplyMethod::Auto | JobApplyMethod::Other(_) => ApplyMethodChoice::Auto,
            JobApplyMethod::Csa => ApplyMethodChoice::Csa,
            JobApplyMethod::Ssa => ApplyMethodChoice::Ssa,
        }
    }
}

choice! {
    /// `job.image.pull_policy`: the Kubernetes image pull policy of the installer container.
    PullPolicy {
        Always = "Always",
        IfNotPresent = "IfNotPresent",
        Never = "Never",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_and_others_are_kept_for_validation() {
        assert_eq!(DeletionPolicy::from("keep"), DeletionPolicy::Keep);
        assert_eq!(DeletionPolicy::Uninstall.as_str(), "uninstall");
        let other = DeletionPolicy::from("orphan");
        assert_eq!(other, DeletionPolicy::Other("orphan".into()));
        assert_eq!(
            serde_json::to_value(&other).expect("json"),
            serde_json::json!("orphan")
        );
        let back: DeletionPolicy = serde_json::from_value(serde_json::json!("keep")).expect("de");
        assert_eq!(back, DeletionPolicy::Keep);
    }
}
