{{/* The namespace everything goes into. */}}
{{- define "cilium.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{/* An image reference: `override`, else `repository:tag` (tag default `v<appVersion>`). */}}
{{- define "cilium.image" -}}
{{- $root := index . 0 -}}
{{- $image := index . 1 -}}
{{- if $image.override -}}
{{- $image.override -}}
{{- else -}}
{{- printf "%s:%s" $image.repository (default (printf "v%s" $root.Chart.AppVersion) $image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The operator image: `<repository>-generic<suffix>:<tag>`, as upstream. */}}
{{- define "cilium.operator.image" -}}
{{- $image := .Values.operator.image -}}
{{- if $image.override -}}
{{- $image.override -}}
{{- else -}}
{{- printf "%s-generic%s:%s" $image.repository $image.suffix (default (printf "v%s" .Chart.AppVersion) $image.tag) -}}
{{- end -}}
{{- end -}}

{{/* Whether the Envoy DaemonSet runs: `envoy.enabled`, else the default of the minor first
installed (`upgradeCompatibility`, empty: this chart's defaults), true from 1.16 on, as
upstream's helper decides it. */}}
{{- define "envoyDaemonSetEnabled" -}}
{{- if not .Values.l7Proxy -}}
false
{{- else if not (kindIs "invalid" .Values.envoy.enabled) -}}
{{- .Values.envoy.enabled -}}
{{- else -}}
{{- semverCompare ">=1.16" (default "1.16" .Values.upgradeCompatibility) -}}
{{- end -}}
{{- end -}}

{{/* Chart 1.20's `envoy-xds-mode`: `envoy.xdsMode`, else "ads" for a cluster first installed at
1.20 or later and "split" (the agent's default before 1.20) for one installed earlier, as
upstream decides it by `upgradeCompatibility`. */}}
{{- define "cilium.envoyXdsMode" -}}
{{- if (dig "xdsMode" "" (default (dict) .Values.envoy)) -}}
{{- .Values.envoy.xdsMode -}}
{{- else if semverCompare ">=1.20" (default "1.20" .Values.upgradeCompatibility) -}}
ads
{{- else -}}
split
{{- end -}}
{{- end -}}

{{/* The Envoy image: an empty tag is the Envoy release shipped with the chart's minor (1.19 and
1.20 keep 1.18's: their Envoy tags were not read upstream, and nothing here depends on them). */}}
{{- define "cilium.envoy.image" -}}
{{- $image := .Values.envoy.image -}}
{{- if $image.override -}}
{{- $image.override -}}
{{- else -}}
{{- $tag := $image.tag -}}
{{- if not $tag -}}
{{- if semverCompare ">=1.18.0-0" .Chart.Version -}}
{{- $tag = "v1.34.10" -}}
{{- else if semverCompare ">=1.17.0-0" .Chart.Version -}}
{{- $tag = "v1.32.9" -}}
{{- else -}}
{{- $tag = "v1.29.9" -}}
{{- end -}}
{{- end -}}
{{- printf "%s:%s" $image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* The API server endpoint overriding the `kubernetes` Service, when `k8sServiceHost` is set. */}}
{{- define "cilium.k8sServiceEnv" -}}
{{- if .Values.k8sServiceHost -}}
- name: KUBERNETES_SERVICE_HOST
  value: {{ .Values.k8sServiceHost | toString | quote }}
- name: KUBERNETES_SERVICE_PORT
  value: {{ .Values.k8sServicePort | toString | quote }}
{{- end -}}
{{- end -}}

{{/* Container securityContext with the given capability list (dropping the rest). */}}
{{- define "cilium.capabilities" -}}
{{- $root := index . 0 -}}
{{- $caps := index . 1 -}}
seLinuxOptions:
  {{- toYaml $root.Values.securityContext.seLinuxOptions | nindent 2 }}
capabilities:
  add:
    {{- toYaml $caps | nindent 4 }}
  drop:
    - ALL
{{- end -}}

{{/* kubeProxyReplacement as "true"/"false". */}}
{{- define "cilium.kpr" -}}
{{- toString .Values.kubeProxyReplacement -}}
{{- end -}}
