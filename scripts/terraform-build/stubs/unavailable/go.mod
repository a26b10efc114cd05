// The one implementation behind the nine remote-state backend stubs (see ../../go.mod). Its path
// lies under github.com/hashicorp/terraform only so that it may import Terraform's internal packages.
module github.com/hashicorp/terraform/internal/backend/remote-state/unavailable

go 1.26.8

require github.com/hashicorp/terraform v1.16.4
