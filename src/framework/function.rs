//! Provider-defined functions (protocol 6.5+: GetFunctions/CallFunction; Terraform 1.8+,
//! OpenTofu 1.7+), called in configuration as `provider::talosboot::<name>(...)`.
//!
//! A function declares typed parameters and a typed return value ([`Signature`]); the client
//! checks argument types, nulls and unknowns against it before calling, so [`Function::call`]
//! receives values of the declared types (null only where a parameter allows it, never unknown
//! unless a parameter allows it). Problems are a [`FunctionError`], optionally naming the argument
//! to blame: the client then points at that argument in the user's source.

use crate::values::{Type, Value};

/// One positional parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct Parameter {
    pub name: String,
    pub ty: Type,
    /// Markdown.
    pub description: String,
    /// When false the client rejects a null argument itself.
    pub allow_null: bool,
    /// When false the client returns an unknown result without calling the provider.
    pub allow_unknown: bool,
}

impl Parameter {
    /// A parameter that takes neither null nor unknown values.
    pub fn new(name: impl Into<String>, ty: Type, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ty,
            description: description.into(),
            allow_null: false,
            allow_unknown: false,
        }
    }

    /// The function receives null for this argument instead of the client rejecting it.
    pub fn allow_null(mut self) -> Self {
        self.allow_null = true;
        self
    }
}

/// What a function takes and returns, and how its documentation reads.
#[derive(Debug, Clone, PartialEq)]
pub struct Signature {
    pub parameters: Vec<Parameter>,
    /// A trailing parameter taking zero or more arguments.
    pub variadic: Option<Parameter>,
    pub return_type: Type,
    /// One line.
    pub summary: String,
    /// Markdown.
    pub description: String,
    /// Non-empty when the function is deprecated.
    pub deprecation: String,
}

impl Signature {
    pub fn new(
        parameters: Vec<Parameter>,
        return_type: Type,
        summary: impl Into<String>,
        description: impl Into<String>,
    ) -> Self {
        Self {
            parameters,
            variadic: None,
            return_type,
            summary: summary.into(),
            description: description.into(),
            deprecation: String::new(),
        }
    }

    /// The type argument `index` is encoded with: its parameter's, or the variadic parameter's.
    pub fn argument_type(&self, index: usize) -> Option<&Type> {
        self.parameters
            .get(index)
            .or(self.variadic.as_ref())
            .map(|p| &p.ty)
    }
}

/// Why a call failed. `argument` is the zero-based index of the argument to blame, if one is.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{text}")]
pub struct FunctionError {
    pub text: String,
    pub argument: Option<usize>,
}

impl FunctionError {
    /// A failure not caused by one argument.
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            argument: None,
        }
    }

    /// A failure caused by argument `index` (zero-based).
    pub fn argument(index: usize, text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            argument: Some(index),
        }
    }
}

/// A provider-defined function. Implementations are pure: no I/O, no provider configuration
/// (clients may call functions before, or without, configuring the provider).
pub trait Function: Send + Sync {
    /// The name after `provider::talosboot::`.
    fn name(&self) -> &'static str;

    fn signature(&self) -> Signature;

    /// `args` has one value per declared parameter (then any variadic ones), already of the
    /// declared types.
    ///
    /// # Errors
    /// A [`FunctionError`] the client shows to the user, at the blamed argument if set.
    fn call(&self, args: &[Value]) -> Result<Value, FunctionError>;
}

/// Typed access to arguments, so that functions do not match on [`Value`] by hand.
pub struct Arguments<'a>(pub &'a [Value]);

impl Arguments<'_> {
    /// Argument `index` as a string; `None` when it is null.
    ///
    /// # Errors
    /// When the argument is missing, unknown or not a string (a client bug, but reported, not a panic).
    pub fn optional_string(&self, index: usize) -> Result<Option<&str>, FunctionError> {
        match self.0.get(index) {
            Some(Value::Null) => Ok(None),
            Some(v) => v.as_str().map(Some).ok_or_else(|| {
                FunctionError::argument(index, format!("argument {} must be a string", index + 1))
            }),
            None => Err(FunctionError::new(format!(
                "argument {} is missing",
                index + 1
            ))),
        }
    }
}

/// Calls `function` with arguments checked against its signature: the count, and no unknown
/// where the parameter does not allow it. A panic in the function becomes an error, not a crash.
///
/// # Errors
/// The function's own [`FunctionError`], or one describing the mismatch.
pub fn call_checked(function: &dyn Function, args: &[Value]) -> Result<Value, FunctionError> {
    let signature = function.signature();
    let fixed = signature.parameters.len();
    if args.len() < fixed || (signature.variadic.is_none() && args.len() > fixed) {
        return Err(FunctionError::new(format!(
            "{} takes {fixed} argument(s), got {}",
            function.name(),
            args.len()
        )));
    }
    for (index, arg) in args.iter().enumerate() {
        let Some(param) = signature
            .parameters
            .get(index)
            .or(signature.variadic.as_ref())
        else {
            continue;
        };
        if !param.allow_unknown && !arg.is_wholly_known() {
            return Err(FunctionError::argument(
                index,
                format!("`{}` must be known", param.name),
            ));
        }
        if !param.allow_null && arg.is_null() {
            return Err(FunctionError::argument(
                index,
                format!("`{}` must not be null", param.name),
            ));
        }
    }
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| function.call(args))).unwrap_or_else(
        |_| {
            Err(FunctionError::new(format!(
                "{} panicked; this is a bug in the provider, please report it",
                function.name()
            )))
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Echo;
    impl Function for Echo {
        fn name(&self) -> &'static str {
            "echo"
        }
        fn signature(&self) -> Signature {
            Signature::new(
                vec![Parameter::new("text", Type::String, "Text.")],
                Type::String,
                "Echo",
                "Returns its argument.",
            )
        }
        fn call(&self, args: &[Value]) -> Result<Value, FunctionError> {
            match Arguments(args).optional_string(0)? {
                Some("panic") => panic!("asked to"),
                Some(s) => Ok(Value::from(s)),
                None => Err(FunctionError::argument(0, "null")),
            }
        }
    }

    #[test]
    fn checked_call_passes_known_arguments() {
        assert_eq!(call_checked(&Echo, &["hi".into()]), Ok("hi".into()));
    }

    #[test]
    fn checked_call_rejects_wrong_count_null_and_unknown() {
        assert_eq!(call_checked(&Echo, &[]).unwrap_err().argument, None);
        assert!(call_checked(&Echo, &["a".into(), "b".into()]).is_err());
        let null = call_checked(&Echo, &[Value::Null]).unwrap_err();
        assert_eq!(null.argument, Some(0));
        assert!(null.text.contains("`text` must not be null"), "{null}");
        let unknown = call_checked(&Echo, &[Value::unknown()]).unwrap_err();
        assert_eq!(unknown.argument, Some(0));
    }

    #[test]
    fn panic_in_a_function_is_an_error() {
        let err = call_checked(&Echo, &["panic".into()]).unwrap_err();
        assert!(err.text.contains("bug in the provider"), "{err}");
    }

    #[test]
    fn argument_type_covers_variadic() {
        let mut s = Echo.signature();
        assert_eq!(s.argument_type(0), Some(&Type::String));
        assert_eq!(s.argument_type(1), None);
        s.variadic = Some(Parameter::new("more", Type::Number, ""));
        assert_eq!(s.argument_type(5), Some(&Type::Number));
    }
}
