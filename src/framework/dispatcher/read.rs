//! ReadResource, ImportResourceState and ReadDataSource: refresh (abandoned on StopProvider, kept
//! while the provider configuration is unknown), import, and data-source reads.

use super::*;

impl Dispatcher {
    pub async fn read(&self, type_name: &str, req: ReadRequest) -> ReadResponse {
        tracing::debug!(type_name, "read");
        let keep = |req: ReadRequest, diagnostics| ReadResponse {
            new_state: req.current_state,
            private: Some(req.private),
            diagnostics,
        };
        let r = match self.resource(type_name) {
            Ok(r) => r,
            Err(diagnostics) => return keep(req, diagnostics),
        };
        if self.provider_config_unknown() {
            // The kubeconfig comes from a resource that is being (re)created: nothing to compare with yet.
            return keep(req, Diagnostics::new());
        }
        let (current, private) = (req.current_state.clone(), req.private.clone());
        let ctx = self.ctx();
        let cancel = ctx.cancel.clone();
        let mut resp = tokio::select! {
            resp = guarded_response(type_name, "read", r.implementation.read(&ctx, req)) => resp,
            _ = cancel.cancelled() => ReadResponse::from(cancelled(type_name)),
        };
        if resp.diagnostics.has_errors() && resp.new_state.is_null() {
            // A failed refresh must not drop the resource from state (the helm_release trap).
            resp.new_state = current;
        }
        null_write_only(&r.schema().block, &mut resp.new_state);
        resp.private.get_or_insert(private);
        resp
    }

    pub async fn import(&self, type_name: &str, req: ImportRequest) -> ImportResponse {
        tracing::debug!(type_name, "import");
        let r = match self.resource(type_name) {
            Ok(r) => r,
            Err(diagnostics) => return ImportResponse::from(diagnostics),
        };
        let mut resp = guarded_response(
            type_name,
            "import",
            r.implementation.import(&self.ctx(), req),
        )
        .await;
        for imported in &mut resp.imported {
            null_write_only(&r.schema().block, &mut imported.state);
        }
        resp
    }

    pub async fn read_data_source(&self, type_name: &str, config: Value) -> DataReadResponse {
        tracing::debug!(type_name, "read data source");
        let d = match self.data_source(type_name) {
            Ok(d) => d,
            Err(diagnostics) => return DataReadResponse::from(diagnostics),
        };
        let ctx = self.ctx();
        let cancel = ctx.cancel.clone();
        tokio::select! {
            resp = guarded_response(type_name, "read", d.implementation.read(&ctx, config)) => resp,
            _ = cancel.cancelled() => DataReadResponse::from(cancelled(type_name)),
        }
    }
}
