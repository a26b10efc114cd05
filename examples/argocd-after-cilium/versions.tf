terraform {
  required_providers {
    talosboot = {
      source  = "talosboot/talosboot"
      version = "0.1.0"
    }
  }
}
