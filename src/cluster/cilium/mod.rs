//! What the provider knows about Cilium's chart versions, below the resources that install it:
//! [`versions`] (pure tables: the value keys a chart version no longer has and what replaces
//! them, the node-port features that need the kube-proxy replacement from 1.19 on, the Gateway
//! API CRDs each version's operator needs), and [`gateway_api`] (whether the cluster has those
//! CRDs: one read of each, judged by the table).
//!
//! The facts, with their upstream sources, are in `docs/guides/versions.md`.

pub mod gateway_api;
pub mod versions;
