// Package unavailable is a Terraform state backend that is not there: every operation answers that
// the backend is not available in this build. The Terraform that scripts/install-tools.sh builds for
// talosboot's tests uses it for the nine remote-state backends whose modules are missing from the
// terraform module zip (see scripts/terraform-build/go.mod).
package unavailable

import (
	"fmt"
	"os"
	"sync"

	"github.com/zclconf/go-cty/cty"

	"github.com/hashicorp/terraform/internal/backend"
	"github.com/hashicorp/terraform/internal/configs/configschema"
	"github.com/hashicorp/terraform/internal/states/statemgr"
	"github.com/hashicorp/terraform/internal/tfdiags"
)

type unavailable struct{ name string }

// explained makes the reason appear once per process, however many instances Terraform makes.
var explained sync.Once

// New returns the stand-in for the backend users name `name` in a `backend` block.
func New(name string) backend.Backend { return &unavailable{name: name} }

func (b *unavailable) summary() string {
	return fmt.Sprintf("Backend %q not available in this build", b.name)
}

func (b *unavailable) detail() string {
	return fmt.Sprintf("This Terraform was built from the terraform module zip for talosboot's tests "+
		"(scripts/install-tools.sh), which lacks the %q backend's module. The local, http, remote "+
		"and cloud backends are available.", b.name)
}

func (b *unavailable) diags() tfdiags.Diagnostics {
	var diags tfdiags.Diagnostics
	return diags.Append(tfdiags.Sourceless(tfdiags.Error, b.summary(), b.detail()))
}

// ConfigSchema is the first call Terraform makes, and it decodes the block against the schema
// before any call that can return a diagnostic: an empty schema makes that decoding fail on the
// block's first argument, so the reason is written first (once per process).
func (b *unavailable) ConfigSchema() *configschema.Block {
	explained.Do(func() {
		fmt.Fprintf(os.Stderr, "Error: %s. %s\n", b.summary(), b.detail())
	})
	return &configschema.Block{}
}

func (b *unavailable) PrepareConfig(cty.Value) (cty.Value, tfdiags.Diagnostics) {
	return cty.NilVal, b.diags()
}

func (b *unavailable) Configure(cty.Value) tfdiags.Diagnostics { return b.diags() }

func (b *unavailable) StateMgr(string) (statemgr.Full, tfdiags.Diagnostics) { return nil, b.diags() }

func (b *unavailable) DeleteWorkspace(string, bool) tfdiags.Diagnostics { return b.diags() }

func (b *unavailable) Workspaces() ([]string, tfdiags.Diagnostics) { return nil, b.diags() }
