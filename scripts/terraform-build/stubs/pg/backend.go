// Package pg stands in for Terraform's "pg" state backend, whose module is not in the terraform
// module zip: it answers that the backend is not available in this build.
package pg

import (
	"github.com/hashicorp/terraform/internal/backend"
	"github.com/hashicorp/terraform/internal/backend/remote-state/unavailable"
)

// New is what Terraform's backend list (internal/backend/init) calls.
func New() backend.Backend { return unavailable.New("pg") }
