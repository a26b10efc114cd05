// git-server: a loopback Git server over SSH for the tests that run the real Flux controllers
// (README.md here; built by scripts/install-tools.sh into .tools/flux/git-server). A test tool only:
// no Go code is part of the provider.
module talosboot.test/flux-build/git-server

go 1.26.0

// gitkit v0.6.0 is what github.com/fluxcd/pkg/gittestserver v0.25.0 (Flux's own Git test server)
// serves SSH with; this tool uses it directly because gittestserver listens only on 127.0.0.1:0 and,
// unless HTTP basic auth is also turned on, accepts every client key (README.md).
require (
	github.com/fluxcd/gitkit v0.6.0
	golang.org/x/crypto v0.47.0
)

require (
	github.com/gofrs/uuid v4.2.0+incompatible // indirect
	golang.org/x/sys v0.40.0 // indirect
)
