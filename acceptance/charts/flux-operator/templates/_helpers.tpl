{{- define "flux-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release name when it contains the chart name, else `<release>-<chart>`. */}}
{{- define "flux-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "flux-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "flux-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "flux-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "flux-operator.labels" -}}
helm.sh/chart: {{ include "flux-operator.chart" . }}
{{ include "flux-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "flux-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "flux-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Whether this chart version has the web UI (0.30 and later) and it is on. */}}
{{- define "flux-operator.web" -}}
{{- and .Values.web.enabled (semverCompare ">=0.30.0-0" .Chart.Version) -}}
{{- end }}

{{/* A CRD whose schema accepts any object (upstream has the full OpenAPI schema). */}}
{{- define "flux-operator.crd" -}}
{{- $root := index . 0 -}}
{{- $plural := index . 1 -}}
{{- $kind := index . 2 -}}
{{- $short := index . 3 -}}
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {{ $plural }}.fluxcd.controlplane.io
  labels:
    {{- include "flux-operator.labels" $root | nindent 4 }}
  {{- /* Upstream's CRDs are kept on uninstall in every chart version (read at 0.28.0 and 0.33.0). */}}
  annotations:
    helm.sh/resource-policy: keep
    {{- with $root.Values.commonAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  group: fluxcd.controlplane.io
  names:
    kind: {{ $kind }}
    listKind: {{ $kind }}List
    plural: {{ $plural }}
    singular: {{ lower $kind }}
    shortNames:
      {{- toYaml $short | nindent 6 }}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      subresources:
        status: {}
      additionalPrinterColumns:
        - jsonPath: .metadata.creationTimestamp
          name: Age
          type: date
        - jsonPath: .status.conditions[?(@.type=="Ready")].status
          name: Ready
          type: string
        - jsonPath: .status.conditions[?(@.type=="Ready")].message
          name: Status
          type: string
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
{{- end }}
