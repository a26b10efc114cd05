//! Debugger mode (`--debug`): the provider is started by hand (typically under a
//! debugger), serves plaintext gRPC without the handshake, and tells the user how to
//! make Terraform/OpenTofu attach to it via `TF_REATTACH_PROVIDERS`.

use std::net::SocketAddr;

/// Full provider address Terraform uses as the reattach key.
pub(crate) const PROVIDER_ADDRESS: &str = "registry.terraform.io/talosboot/talosboot";

/// The JSON value of `TF_REATTACH_PROVIDERS` for a provider served at `addr`.
pub(crate) fn reattach_json(addr: SocketAddr, pid: u32) -> String {
    serde_json::json!({
        PROVIDER_ADDRESS: {
            "Protocol": "grpc",
            "ProtocolVersion": 6,
            "Pid": pid,
            "Test": true,
            "Addr": { "Network": "tcp", "String": addr.to_string() },
        }
    })
    .to_string()
}

/// The banner printed to stdout in debug mode.
pub(crate) fn banner(addr: SocketAddr, pid: u32) -> String {
    format!(
        "talosboot provider started in debug mode (plaintext gRPC on {addr}, pid {pid}).\n\
         To make Terraform or OpenTofu use this process instead of starting its own, set \
         this variable in the shell where you run them; stop the provider with Ctrl-C.\n\
         \n\
         \tTF_REATTACH_PROVIDERS='{json}'\n",
        json = reattach_json(addr, pid)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reattach_value_shape() {
        let addr: SocketAddr = "127.0.0.1:1234".parse().unwrap();
        let value: serde_json::Value = serde_json::from_str(&reattach_json(addr, 42)).unwrap();
        let entry = &value[PROVIDER_ADDRESS];
        assert_eq!(entry["Protocol"], "grpc");
        assert_eq!(entry["ProtocolVersion"], 6);
        assert_eq!(entry["Pid"], 42);
        assert_eq!(entry["Test"], true);
        assert_eq!(entry["Addr"]["Network"], "tcp");
        assert_eq!(entry["Addr"]["String"], "127.0.0.1:1234");
        assert!(banner(addr, 42).contains("TF_REATTACH_PROVIDERS='{"));
    }
}
