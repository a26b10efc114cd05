//! The model of `talosboot_helm_release`: [`ReleaseCommon`] and what `helm_release` has beside it
//! (`create_namespace`, `atomic`, `max_history`, `description`, a local chart's digest, `ready`),
//! and its checks without I/O.

use serde::{Deserialize, Serialize};

use crate::framework::Diagnostics;
use crate::resources::release::ReleaseCommon;
use crate::resources::release::common::parse_timeout;
use crate::values::AttributePath;

/// Configuration, plan and state share one shape.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
pub struct HelmReleaseModel {
    #[serde(flatten)]
    pub common: ReleaseCommon,
    pub create_namespace: Option<bool>,
    pub atomic: Option<bool>,
    pub max_history: Option<i64>,
    pub description: Option<String>,
    pub chart_sha256: Option<String>,
    pub ready: Option<bool>,
}

impl HelmReleaseModel {
    /// Checks of what is `helm_release`'s own (the shared inputs are checked by
    /// [`ReleaseCommon::validate`]).
    pub fn validate(&self, d: &mut Diagnostics) {
        if let Some(t) = &self.common.timeout {
            if let Err(e) = parse_timeout(t) {
                d.error_at(
                    AttributePath::attr("timeout"),
                    "Invalid timeout",
                    format!("{e} (`helm_release` takes the same seconds)."),
                );
            }
        }
        if self.common.chart.as_deref() == Some("") {
            d.error_at(
                AttributePath::attr("chart"),
                "Empty chart",
                "`chart` names the chart to install.",
            );
        }
        if let Some(n) = self.max_history {
            if n < 0 {
                d.error_at(
                    AttributePath::attr("max_history"),
                    "Invalid max_history",
                    "`max_history` must be 0 or more.",
                );
            }
        }
    }
}
