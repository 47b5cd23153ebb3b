{{- define "wayline.name" -}}{{ .Release.Name }}-wayline{{- end -}}

{{/* Labels on every object (the Kubernetes recommended set). */}}
{{- define "wayline.labels" -}}
app.kubernetes.io/name: wayline
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: wayline
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component: never change after install (selectors are immutable). */}}
{{- define "wayline.selector" -}}
app.kubernetes.io/name: wayline
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "wayline.serviceAccount" -}}
{{- if .Values.serviceAccount.name -}}{{ .Values.serviceAccount.name }}{{- else -}}{{ include "wayline.name" . }}-operator{{- end -}}
{{- end -}}

{{- define "wayline.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "wayline.worldUrl" -}}
{{- if .Values.world.url -}}
{{ .Values.world.url }}
{{- else if .Values.nats.enabled -}}
nats://{{ include "wayline.name" . }}-nats.{{ .Release.Namespace }}.svc:4222?prefix={{ .Values.world.prefix }}&replicas={{ .Values.world.replicas }}
{{- else -}}
{{ fail "set world.url, or nats.enabled=true" }}
{{- end -}}
{{- end -}}

{{/* The workers that will run: entries of .Values.workers with at least one app. */}}
{{- define "wayline.workerCount" -}}
{{- $n := 0 -}}
{{- range .Values.workers -}}{{- if .apps -}}{{- $n = add1 $n -}}{{- end -}}{{- end -}}
{{- $n -}}
{{- end -}}

{{/* The pod's IP from the downward API: probes' endpoints bind to it, not to 0.0.0.0. */}}
{{- define "wayline.podIP" -}}
- name: POD_IP
  valueFrom: {fieldRef: {fieldPath: status.podIP}}
{{- end -}}
