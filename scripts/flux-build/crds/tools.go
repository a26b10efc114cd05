//go:build tools

// Package tools pins the API packages controller-gen reads, so `go mod tidy` keeps their dependencies.
package tools

import (
	_ "github.com/controlplaneio-fluxcd/flux-operator/api/v1"
	_ "github.com/fluxcd/helm-controller/api/v2"
	_ "github.com/fluxcd/helm-controller/api/v2beta1"
	_ "github.com/fluxcd/helm-controller/api/v2beta2"
	_ "github.com/fluxcd/image-automation-controller/api/v1"
	_ "github.com/fluxcd/image-automation-controller/api/v1beta1"
	_ "github.com/fluxcd/image-automation-controller/api/v1beta2"
	_ "github.com/fluxcd/image-reflector-controller/api/v1"
	_ "github.com/fluxcd/image-reflector-controller/api/v1beta1"
	_ "github.com/fluxcd/image-reflector-controller/api/v1beta2"
	_ "github.com/fluxcd/kustomize-controller/api/v1"
	_ "github.com/fluxcd/kustomize-controller/api/v1beta1"
	_ "github.com/fluxcd/kustomize-controller/api/v1beta2"
	_ "github.com/fluxcd/notification-controller/api/v1"
	_ "github.com/fluxcd/notification-controller/api/v1beta1"
	_ "github.com/fluxcd/notification-controller/api/v1beta2"
	_ "github.com/fluxcd/notification-controller/api/v1beta3"
	_ "github.com/fluxcd/source-controller/api/v1"
	_ "github.com/fluxcd/source-controller/api/v1beta1"
	_ "github.com/fluxcd/source-controller/api/v1beta2"
	_ "github.com/fluxcd/source-watcher/api/v2/v1beta1"
)
