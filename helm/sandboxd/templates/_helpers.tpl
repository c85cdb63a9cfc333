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

{{- define "sandboxd.peerSecretName" -}}
{{- printf "%s-peer" (include "sandboxd.fullname" .) -}}
{{- end -}}

{{- define "sandboxd.egressCASecretName" -}}
{{- printf "%s-egress-ca" (include "sandboxd.fullname" .) -}}
{{- end -}}

{{- define "sandboxd.peersServiceName" -}}
{{- printf "%s-peers" (include "sandboxd.fullname" .) -}}
{{- end -}}

{{/* Values the schema cannot judge alone; each failure says what to change. */}}
{{- define "sandboxd.checks" -}}
{{- if hasKey .Values "persistence" -}}
{{- fail "persistence is gone from this chart: each replica's data dir is an emptyDir and runs and tokens live in the cluster; remove persistence from your values" -}}
{{- end -}}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.replication.enabled) -}}
{{- fail (printf "replicaCount %d needs replication.enabled: true (replicas share conversations through Leases); set replicaCount: 1 to run without replication" (int .Values.replicaCount)) -}}
{{- end -}}
{{- if and .Values.hostNetwork (gt (add .Values.service.port .Values.replicaCount -1) 65535) -}}
{{- fail (printf "with hostNetwork replica i listens on service.port + i, and %d + %d replicas passes port 65535; lower service.port" (int .Values.service.port) (int .Values.replicaCount)) -}}
{{- end -}}
{{- end -}}

{{/* The pods' affinity: the user's own, else anti-affinity by podAntiAffinity. */}}
{{- define "sandboxd.affinity" -}}
{{- if .Values.affinity -}}
{{- toYaml .Values.affinity -}}
{{- else if eq .Values.podAntiAffinity "soft" -}}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "sandboxd.selectorLabels" . | nindent 12 }}
{{- else if eq .Values.podAntiAffinity "hard" -}}
podAntiAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
    - topologyKey: kubernetes.io/hostname
      labelSelector:
        matchLabels:
          {{- include "sandboxd.selectorLabels" . | nindent 10 }}
{{- end -}}
{{- end -}}

{{/*
An exec probe of path on 127.0.0.1 at service.port + the pod's index, for
hostNetwork, where each replica has its own port and an httpGet probe can
name only one for all. Bash builtins only (the image has no wget or curl):
declare -i does the sum without "$(", which the kubelet would try to expand.
*/}}
{{- define "sandboxd.execProbe" -}}
{{- $script := printf "declare -i port=%d+SANDBOXD_POD_INDEX; exec 3<>/dev/tcp/127.0.0.1/$port || exit 1; printf 'GET %s HTTP/1.0\\r\\nHost: 127.0.0.1\\r\\n\\r\\n' >&3; read -r -t 3 _ code _ <&3; [ \"$code\" = 200 ]" (int .root.Values.service.port) .path -}}
exec:
  command: [bash, -c, {{ $script | quote }}]
{{- end -}}
