{{/* Names, labels and computed values shared by the templates. */}}

{{- define "sandboxd.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "sandboxd.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "sandboxd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sandboxd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "sandboxd.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "sandboxd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "sandboxd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "sandboxd.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The namespace of the sandbox pods. */}}
{{- define "sandboxd.sandboxNamespace" -}}
{{- default .Release.Namespace .Values.sandboxes.namespace -}}
{{- end -}}

{{- define "sandboxd.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "sandboxd.tenantsSecretName" -}}
{{- default (printf "%s-tenants" (include "sandboxd.fullname" .)) .Values.existingTenantsSecret -}}
{{- end -}}
