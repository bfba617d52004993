{{/* The name of every object: the release, with the chart's name unless it already holds it. */}}
{{- define "mcp-gateway.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "mcp-gateway.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "mcp-gateway.labels" -}}
{{ include "mcp-gateway.selectorLabels" . }}
app.kubernetes.io/component: gateway
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "mcp-gateway.configMapName" -}}
{{- default (include "mcp-gateway.fullname" .) .Values.existingConfigMap -}}
{{- end -}}

{{- define "mcp-gateway.envSecretName" -}}
{{- default (include "mcp-gateway.fullname" .) .Values.existingEnvSecret -}}
{{- end -}}

{{- define "mcp-gateway.secretFilesName" -}}
{{- default (printf "%s-files" (include "mcp-gateway.fullname" .)) .Values.existingSecretFiles -}}
{{- end -}}

{{- define "mcp-gateway.hasSecretFiles" -}}
{{- if or .Values.existingSecretFiles .Values.secretFiles -}}true{{- end -}}
{{- end -}}
