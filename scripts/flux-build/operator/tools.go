//go:build tools

package tools

import _ "github.com/controlplaneio-fluxcd/flux-operator/cmd/operator"
