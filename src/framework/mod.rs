//! The provider framework: the resource and data-source traits, the schema model, diagnostics and
//! the dispatcher that every tfplugin6 RPC goes through.

mod diagnostics;
pub mod dispatcher;
pub mod function;
pub mod identity;
pub mod model;
pub mod plan;
pub mod private;
mod resource;
mod schema;
pub mod secret_hash;
mod walks;

pub use diagnostics::{Diagnostic, Diagnostics, Severity};
pub use dispatcher::Dispatcher;
pub use dispatcher::{ListOutcome, ListedObject};
pub use function::{Arguments, Function, FunctionError, Parameter, Signature};
pub use identity::{ForImport, IdentityAttribute, IdentitySchema, IdentitySource};
pub use resource::*;
pub use schema::{Attribute, AttributeType, Block, NestedBlock, Nesting, Schema};
pub use walks::{
    deprecated_set, mark_unset_computed_unknown, null_write_only, requires_replace, write_only_set,
};
