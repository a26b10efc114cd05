//! List resources (`terraform query`, protocol 6.10): registration, validation and the list
//! itself, each result with the identity its state declares and, when asked, the state.

use super::*;

/// One result as the protocol sends it.
pub struct ListedObject {
    pub display_name: String,
    pub identity: Value,
    /// Only when the request asked for resource objects.
    pub state: Option<Value>,
}

#[derive(Default)]
pub struct ListOutcome {
    pub results: Vec<ListedObject>,
    pub diagnostics: Diagnostics,
}

impl Dispatcher {
    /// Registers `lists`. A list of a managed type without identity cannot be answered (Terraform
    /// needs an identity per result): registering one is a programming error.
    ///
    /// # Panics
    /// A list resource names a managed type that is missing or has no identity.
    pub fn with_list_resources(mut self, lists: Vec<Arc<dyn ListResource>>) -> Self {
        for list in &lists {
            assert!(
                self.identities.contains_key(list.type_name()),
                "list resource {} lists a resource type without identity",
                list.type_name()
            );
        }
        self.list_resources
            .extend(by_type_name(lists, |l| l.type_name(), |l| l.schema()));
        self
    }

    pub fn list_resource_schemas(&self) -> impl Iterator<Item = (&str, &Schema)> {
        self.list_resources
            .iter()
            .map(|(k, l)| (k.as_str(), l.schema()))
    }

    fn list_resource(&self, type_name: &str) -> Result<&Registered<dyn ListResource>, Diagnostics> {
        self.list_resources
            .get(type_name)
            .ok_or_else(|| unknown_type("list resource", type_name))
    }

    /// The value type of a list resource's `config` block.
    pub fn list_resource_type(&self, type_name: &str) -> Result<&Type, Diagnostics> {
        self.list_resource(type_name).map(|l| l.value_type())
    }

    /// ValidateListResourceConfig: the list's checks, with deprecation warnings.
    pub fn validate_list(&self, type_name: &str, config: &Value) -> Diagnostics {
        let l = match self.list_resource(type_name) {
            Ok(l) => l,
            Err(diagnostics) => return diagnostics,
        };
        let mut diagnostics = deprecation_warnings(l.schema(), config);
        let validated = validate_guarded(type_name, || {
            l.implementation.validate(config, &mut diagnostics)
        });
        match validated {
            Ok(()) => diagnostics,
            Err(panicked) => panicked,
        }
    }

    /// ListResource: validation, then the list (abandoned on StopProvider), each result with its
    /// identity; at most `limit` results.
    pub async fn list(&self, type_name: &str, req: ListRequest) -> ListOutcome {
        tracing::debug!(type_name, "list");
        let l = match self.list_resource(type_name) {
            Ok(l) => l,
            Err(diagnostics) => {
                return ListOutcome {
                    diagnostics,
                    ..Default::default()
                };
            }
        };
        let mut diagnostics = self.validate_list(type_name, &req.config);
        if diagnostics.has_errors() {
            return ListOutcome {
                diagnostics,
                ..Default::default()
            };
        }
        let include = req.include_resource_object;
        let limit = usize::try_from(req.limit).unwrap_or(0);
        let ctx = self.ctx();
        let cancel = ctx.cancel.clone();
        let resp = tokio::select! {
            resp = guarded_response(type_name, "list", l.implementation.list(&ctx, req)) => resp,
            _ = cancel.cancelled() => ListResponse::from(cancelled(type_name)),
        };
        diagnostics.extend(resp.diagnostics);
        let block = self.resource(type_name).map(|r| &r.schema().block).ok();
        let mut results = Vec::new();
        for mut listed in resp.results.into_iter().take(limit) {
            let Some(identity) = self.identity_of(type_name, &listed.state) else {
                continue;
            };
            if let Some(block) = block {
                null_write_only(block, &mut listed.state);
            }
            results.push(ListedObject {
                display_name: listed.display_name,
                identity,
                state: include.then_some(listed.state),
            });
        }
        ListOutcome {
            results,
            diagnostics,
        }
    }
}
