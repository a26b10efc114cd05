//! The provider framework: the resource and data-source traits, the schema model, diagnostics and
//! the dispatcher that every tfplugin6 RPC goes through.

mod diagnostics;
pub mod dispatcher;
pub mod model;
pub mod plan;
mod resource;
mod schema;

pub use diagnostics::{Diagnostic, Diagnostics, Severity};
pub use dispatcher::Dispatcher;
pub use resource::*;
pub use schema::{
    Attribute, AttributeType, Block, NestedBlock, Nesting, Schema, null_write_only, write_only_set,
};
