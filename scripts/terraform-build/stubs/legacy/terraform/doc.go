// Package terraform is empty: Terraform imports internal/legacy/terraform only from a test, but
// `go mod tidy` resolves test imports too, so the path must exist.
package terraform
