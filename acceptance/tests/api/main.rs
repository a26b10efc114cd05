//! API-server acceptance tests, written against the Kubernetes API through the `kube` crate (and
//! `kubectl`), not against store internals, so they could run against a real cluster.
//!
//! Index:
//! - `common`: start a simulated cluster, build clients.
//! - `crud`: CRUD, status codes and `Status` bodies, resourceVersion conflicts, generation,
//!   label and field selectors, paging, discovery.
//! - `watch`: raw watches, bookmarks, 410 Gone, kube-runtime's `watcher`.
//! - `apply`: server-side apply: managers, conflicts, force, field removal.
//! - `patch`: merge, JSON and strategic merge patches, `/status`.
//! - `delete`: finalizers, propagation policies, ownerReference GC, namespace termination.
//! - `jobs`: Job defaulting and `spec.template` immutability.
//! - `crd`: a CRD gets established and its kind (FluxInstance) is served.
//! - `logs`: `pods/log` (plain, tail, follow, `sinceTime`/`sinceSeconds`, `timestamps`).
//! - `faults`: 429 with Retry-After, unreachable period and recovery, dropped connections,
//!   latency, the admin endpoint.
//! - `auth`: client certificates, bearer tokens, rejections.
//! - `authorization`: RBAC for ServiceAccounts (tokens from `SimCluster::service_account_token`):
//!   real Forbidden wording, Roles and bindings, namespace scope, resourceNames, subresources,
//!   aggregation, escalation prevention (`escalate`/`bind`), admin stays admin.
//! - `kubectl`: Debian's kubectl 1.20 against the server (incl. Pod Security warnings and 403s).
//! - `leases`: Lease updates need a resourceVersion, PUT creates, spec validation.
//! - `rbac`: bootstrap ClusterRoles, roleRef required and immutable.
//! - `serviceaccounts`: `default` ServiceAccount per namespace, pods need their ServiceAccount.

mod apply;
mod auth;
mod authorization;
mod common;
mod crd;
mod crud;
mod delete;
mod faults;
mod jobs;
mod kubectl;
mod leases;
mod logs;
mod patch;
mod rbac;
mod serviceaccounts;
mod watch;
