// Stands in for Terraform's internal/legacy module (see ../../go.mod), which only a Terraform test imports.
module github.com/hashicorp/terraform/internal/legacy

go 1.26.8
