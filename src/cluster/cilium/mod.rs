//! What the provider knows about Cilium below the resources that install it:
//! [`versions`] (pure tables: the value keys a chart version no longer has and what replaces
//! them, the node-port features that need the kube-proxy replacement from 1.19 on, the Gateway
//! API CRDs each version's operator needs), [`upgrade_path`] (one minor at a time, latest patch
//! first, pure), [`running_config`] (what the running `cilium-config` says, and which of it an
//! install would flip, pure), [`gateway_api`] (whether the cluster has those CRDs: one read of
//! each, judged by the table), and [`preflight`] (Cilium's pre-flight DaemonSet before an upgrade:
//! applied, waited for on every node, removed), [`rollout`] (the agents' rollout by node).
//!
//! The facts, with their upstream sources, are in `docs/guides/versions.md` and
//! `docs/guides/upgrading-cilium.md`.

pub mod gateway_api;
pub mod preflight;
pub mod rollout;
pub mod running_config;
pub mod upgrade_path;
pub mod versions;
