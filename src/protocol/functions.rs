//! GetFunctions / CallFunction at the protocol edge: signatures to `pb::Function`, arguments
//! decoded against their parameter types, the result encoded against the return type, failures
//! as `pb::FunctionError` with the argument index.

use std::collections::HashMap;

use super::convert::{decode, encode};
use super::proto as pb;
use crate::framework::function::call_checked;
use crate::framework::{Dispatcher, FunctionError, Parameter, Signature};

fn parameter(p: &Parameter) -> pb::function::Parameter {
    pb::function::Parameter {
        name: p.name.clone(),
        r#type: p.ty.to_json_bytes(),
        allow_null_value: p.allow_null,
        allow_unknown_values: p.allow_unknown,
        description: p.description.clone(),
        description_kind: pb::StringKind::Markdown as i32,
    }
}

fn function(s: &Signature) -> pb::Function {
    pb::Function {
        parameters: s.parameters.iter().map(parameter).collect(),
        variadic_parameter: s.variadic.as_ref().map(parameter),
        r#return: Some(pb::function::Return {
            r#type: s.return_type.to_json_bytes(),
        }),
        summary: s.summary.clone(),
        description: s.description.clone(),
        description_kind: pb::StringKind::Markdown as i32,
        deprecation_message: s.deprecation.clone(),
    }
}

/// Every function, as GetFunctions and GetProviderSchema carry them.
pub fn definitions(dispatcher: &Dispatcher) -> HashMap<String, pb::Function> {
    dispatcher
        .functions()
        .map(|(name, s)| (name.to_owned(), function(&s)))
        .collect()
}

/// GetMetadata's list of function names.
pub fn metadata(dispatcher: &Dispatcher) -> Vec<pb::get_metadata::FunctionMetadata> {
    dispatcher
        .functions()
        .map(|(name, _)| pb::get_metadata::FunctionMetadata {
            name: name.to_owned(),
        })
        .collect()
}

fn error(e: FunctionError) -> pb::FunctionError {
    pb::FunctionError {
        text: e.text,
        function_argument: e.argument.and_then(|i| i64::try_from(i).ok()),
    }
}

/// CallFunction: decode the arguments against the parameter types, call, encode the result.
pub fn call(
    dispatcher: &Dispatcher,
    req: pb::call_function::Request,
) -> pb::call_function::Response {
    let outcome = (|| {
        let f = dispatcher.function(&req.name)?;
        let signature = f.signature();
        let mut args = Vec::with_capacity(req.arguments.len());
        for (index, arg) in req.arguments.iter().enumerate() {
            let Some(ty) = signature.argument_type(index) else {
                return Err(FunctionError::new(format!(
                    "{} takes {} argument(s), got {}",
                    req.name,
                    signature.parameters.len(),
                    req.arguments.len()
                )));
            };
            let value = decode(Some(arg), ty, "function argument")
                .map_err(|d| FunctionError::argument(index, d.detail))?;
            args.push(value);
        }
        let result = call_checked(f, &args)?;
        encode(&result, &signature.return_type, "function result")
            .map_err(|d| FunctionError::new(d.detail))
    })();
    match outcome {
        Ok(result) => pb::call_function::Response {
            result: Some(result),
            error: None,
        },
        Err(e) => pb::call_function::Response {
            result: None,
            error: Some(error(e)),
        },
    }
}
