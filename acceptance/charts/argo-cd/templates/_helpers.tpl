{{- define "argo-cd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* `<release>` when it contains the name (`argocd`), else `<release>-<name>`, as upstream. */}}
{{- define "argo-cd.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "argo-cd.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{- define "argo-cd.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* A component's object name: (dict "context" $ "component" "server"). */}}
{{- define "argo-cd.component.fullname" -}}
{{- printf "%s-%s" (include "argo-cd.fullname" .context) .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "argo-cd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "argo-cd.name" .context }}-{{ .name }}
app.kubernetes.io/instance: {{ .context.Release.Name }}
{{- end -}}

{{- define "argo-cd.labels" -}}
helm.sh/chart: {{ include "argo-cd.chart" .context }}
{{ include "argo-cd.selectorLabels" (dict "context" .context "name" .name) }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/managed-by: {{ .context.Release.Service }}
app.kubernetes.io/part-of: argocd
app.kubernetes.io/version: {{ include "argo-cd.defaultTag" .context }}
{{- end -}}

{{- define "argo-cd.defaultTag" -}}
{{- default .Chart.AppVersion .Values.global.image.tag -}}
{{- end -}}

{{- define "argo-cd.image" -}}
{{- printf "%s:%s" .Values.global.image.repository (include "argo-cd.defaultTag" .) -}}
{{- end -}}

{{/* Soft anti-affinity between a component's pods (global.affinity.podAntiAffinity: soft). */}}
{{- define "argo-cd.affinity" -}}
{{- if eq .context.Values.global.affinity.podAntiAffinity "soft" -}}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
  - weight: 100
    podAffinityTerm:
      labelSelector:
        matchLabels:
          app.kubernetes.io/name: {{ include "argo-cd.name" .context }}-{{ .component }}
      topologyKey: kubernetes.io/hostname
{{- else -}}
{}
{{- end -}}
{{- end -}}

{{/* Scheduling and common pod spec fields of every component. */}}
{{- define "argo-cd.podScheduling" -}}
{{- with .Values.global.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.global.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Container securityContext of every component. */}}
{{- define "argo-cd.containerSecurityContext" -}}
runAsNonRoot: true
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
seccompProfile:
  type: RuntimeDefault
capabilities:
  drop:
  - ALL
{{- end -}}

{{/* A CRD accepting any object (upstream has the full schema). */}}
{{- define "argo-cd.crd" -}}
{{- $root := index . 0 -}}
{{- $plural := index . 1 -}}
{{- $kind := index . 2 -}}
{{- $short := index . 3 -}}
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {{ $plural }}.argoproj.io
  labels:
    app.kubernetes.io/name: {{ $plural }}.argoproj.io
    app.kubernetes.io/part-of: argocd
  annotations:
    {{- if $root.Values.crds.keep }}
    helm.sh/resource-policy: keep
    {{- end }}
    {{- with $root.Values.crds.annotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  group: argoproj.io
  names:
    kind: {{ $kind }}
    listKind: {{ $kind }}List
    plural: {{ $plural }}
    singular: {{ lower $kind }}
    shortNames:
      {{- toYaml $short | nindent 6 }}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    {{- if ne $kind "AppProject" }}
    subresources:
      status: {}
    {{- end }}
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
{{- end -}}
