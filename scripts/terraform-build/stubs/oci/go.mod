// Stands in for Terraform's "oci" state backend (see ../../go.mod).
module github.com/hashicorp/terraform/internal/backend/remote-state/oci

go 1.26.8

require (
	github.com/hashicorp/terraform v1.16.4
	github.com/hashicorp/terraform/internal/backend/remote-state/unavailable v0.0.0
)
