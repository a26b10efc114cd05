//! talosboot: a Terraform/OpenTofu provider that takes a fresh Talos cluster from "API up, no CNI"
//! to Cilium and Flux running, from a plain `tofu apply`.
//!
//! Layers, from the top; each uses only the layers listed after the arrow (`tests/layering.rs`
//! checks every `crate::` path in `src/` against this map):
//! - `main.rs` → [`plugin`], [`provider`]: serve the plugin;
//! - [`provider`] → everything below: the provider block's schema and decoding, the resource list,
//!   the gRPC routes;
//! - [`docs`] → [`framework`], [`values`]: registry docs rendered from the schema;
//! - [`resources`] → [`framework`], [`cluster`], [`values`]: one module per resource or data source;
//! - [`functions`] → [`framework`], [`cluster`], [`values`]: provider-defined functions (`provider::talosboot::...`);
//! - [`protocol`] → [`framework`], [`values`]: generated tfplugin6 code and the thin RPC service
//!   (decode, dispatch, encode);
//! - [`framework`] → [`values`]: resource, data-source and provider traits, schema, diagnostics, the
//!   dispatcher's safety nets; provider data travels through it opaquely;
//! - [`cluster`] → (nothing): by subsystem (its own map heads `cluster/mod.rs`, also checked):
//!   the client (one handle, one way to connect), the bootstrap pod's endpoint, the diagnosis
//!   table, the pre-CNI Job engine, readiness, Helm (installs on the engine, records, values,
//!   render-derived RBAC, status), Flux;
//! - [`plugin`] → (nothing): the go-plugin runtime (handshake, AutoMTLS, controller/stdio/broker,
//!   health, logs);
//! - [`values`] → (nothing): cty values, their msgpack/JSON codecs and attribute paths.

pub mod cluster;
pub mod docs;
pub mod framework;
pub mod functions;
pub mod plugin;
pub mod protocol;
pub mod provider;
pub mod resources;
pub mod values;
