//! The chart repositories (placeholder; see the charts helper's work).
