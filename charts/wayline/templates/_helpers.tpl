{{- define "wayline.name" -}}{{ .Release.Name }}-wayline{{- end -}}

{{- define "wayline.labels" -}}
app.kubernetes.io/name: wayline
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
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
