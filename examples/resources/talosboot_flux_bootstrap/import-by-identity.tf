# The FluxInstance's name is always `flux`, so `name` may be left out.
import {
  to = talosboot_flux_bootstrap.flux_operator_bootstrap
  identity = {
    namespace = "flux-system"
    name      = "flux"
  }
}
