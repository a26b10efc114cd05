//! talosboot: a Terraform/OpenTofu provider that takes a fresh Talos cluster from "API up, no CNI"
//! to Cilium and Flux running, from a plain `tofu apply`.
//!
//! Layers, each depending only on the ones below it:
//! - [`plugin`]: the go-plugin runtime (handshake, AutoMTLS, controller/stdio/broker/health, logs);
//! - [`protocol`]: generated tfplugin6 code and the thin RPC service (decode, dispatch, encode);
//! - [`framework`]: resource and data-source traits, schema, diagnostics, the dispatcher's safety nets;
//! - [`values`]: cty values, their msgpack/JSON codecs and attribute paths;
//! - [`cluster`]: provider configuration, the lazy Kubernetes client, Helm release records;
//! - [`resources`]: one module per resource or data source;
//! - [`functions`]: provider-defined functions (`provider::talosboot::...`);
//! - [`provider`]: the assembly of all of the above;
//! - [`docs`]: registry docs rendered from the schema.

pub mod cluster;
pub mod docs;
pub mod framework;
pub mod functions;
pub mod plugin;
pub mod protocol;
pub mod provider;
pub mod resources;
pub mod values;
