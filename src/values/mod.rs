//! cty values as Terraform sends them: the type system, the value model, attribute paths, and the
//! msgpack/JSON codecs that carry them over tfplugin6.
//!
//! Terraform speaks cty. Every value on the wire is encoded against a *type* that both sides know from
//! the schema, so decoding always takes a [`Type`]. Unknown values (and refined unknowns) are first-class:
//! plan runs before everything is known, and a provider must carry unknowns through untouched.

mod json;
mod msgpack;
mod number;
mod path;
mod types;
mod value;

#[cfg(test)]
mod testgen;

pub use json::{JsonDecodeOptions, JsonError, from_json, from_json_with, to_json};
pub use msgpack::{MAX_DEPTH, MsgpackError, from_msgpack, to_msgpack};
pub use path::{AttributePath, PathStep};
pub use types::{MAX_TYPE_DEPTH, Type, TypeJsonError};
pub use value::{Number, Refinements, Value};
