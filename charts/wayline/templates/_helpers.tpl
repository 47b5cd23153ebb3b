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

{{/* The chart's NATS is installed: enabled, and no other world is named. */}}
{{- define "wayline.ownNats" -}}
{{- if and .Values.nats.enabled (not .Values.world.url) (not .Values.world.urlSecret.name) -}}true{{- end -}}
{{- end -}}

{{/* Streams' replicas: world.replicas, or (0) as many as the chart's NATS has nodes. */}}
{{- define "wayline.streamReplicas" -}}
{{- if .Values.world.replicas -}}{{ .Values.world.replicas }}{{- else if include "wayline.ownNats" . -}}{{ .Values.nats.replicas }}{{- else -}}1{{- end -}}
{{- end -}}

{{/* Where the client-side files of NATS authentication and TLS are mounted. */}}
{{- define "wayline.natsAuthDir" -}}/etc/wayline/nats-auth{{- end -}}
{{- define "wayline.natsTlsDir" -}}/etc/wayline/nats-tls{{- end -}}

{{/* The Secret with the clients' NATS credentials: the one nats.auth.secret names, else the
     one the chart generates for its own NATS (nats.auth.generate, the default; password type
     only). Empty: the chart's NATS lets any client in (generate: false and no Secret). */}}
{{- define "wayline.natsAuthSecret" -}}
{{- if .Values.nats.auth.secret -}}
{{ .Values.nats.auth.secret }}
{{- else if and .Values.nats.enabled .Values.nats.auth.generate (eq .Values.nats.auth.type "password") -}}
{{ include "wayline.name" . }}-nats-credentials
{{- end -}}
{{- end -}}

{{/* The world's URL as the pods see it (the chart's NATS: its peers, and the credentials
     as $(NATS_USER)/$(NATS_PASSWORD), which Kubernetes expands from the pod's env). */}}
{{- define "wayline.worldUrl" -}}
{{- if .Values.world.urlSecret.name -}}
(from Secret {{ .Values.world.urlSecret.name }}, key {{ .Values.world.urlSecret.key }})
{{- else if .Values.world.url -}}
{{ .Values.world.url }}
{{- else if .Values.nats.enabled -}}
{{- $name := printf "%s-nats" (include "wayline.name" .) -}}
{{- $scheme := ternary "tls" "nats" (not (empty .Values.nats.tls.secret)) -}}
{{- $creds := "" -}}
{{- if and (include "wayline.natsAuthSecret" .) (eq .Values.nats.auth.type "password") -}}{{- $creds = "$(NATS_USER):$(NATS_PASSWORD)@" -}}{{- end -}}
{{- $hosts := list -}}
{{- if gt (int .Values.nats.replicas) 1 -}}
{{- range $i := until (int .Values.nats.replicas) -}}
{{- $hosts = append $hosts (printf "%s-%d.%s-headless.%s.svc:4222" $name $i $name $.Release.Namespace) -}}
{{- end -}}
{{- else -}}
{{- $hosts = list (printf "%s.%s.svc:4222" $name .Release.Namespace) -}}
{{- end -}}
{{ $scheme }}://{{ $creds }}{{ join "," $hosts }}?prefix={{ .Values.world.prefix }}&replicas={{ include "wayline.streamReplicas" . }}
{{- if and .Values.nats.auth.secret (eq .Values.nats.auth.type "nkey") -}}&nkeys_seed={{ include "wayline.natsAuthDir" . }}/seed{{- end -}}
{{- if .Values.nats.tls.secret -}}&tls_ca={{ include "wayline.natsTlsDir" . }}/ca.crt{{- end -}}
{{- else -}}
{{ fail "set world.url or world.urlSecret.name, or nats.enabled=true" }}
{{- end -}}
{{- end -}}

{{/* The env entries that give a pod its world (WAYLINE_WORLD and what it refers to). */}}
{{- define "wayline.worldEnv" -}}
{{- if .Values.world.urlSecret.name -}}
- name: WAYLINE_WORLD
  valueFrom: {secretKeyRef: {name: {{ .Values.world.urlSecret.name }}, key: {{ .Values.world.urlSecret.key }}}}
{{- else -}}
{{- if and (include "wayline.ownNats" .) (include "wayline.natsAuthSecret" .) (eq .Values.nats.auth.type "password") }}
- name: NATS_USER
  valueFrom: {secretKeyRef: {name: {{ include "wayline.natsAuthSecret" . }}, key: user}}
- name: NATS_PASSWORD
  valueFrom: {secretKeyRef: {name: {{ include "wayline.natsAuthSecret" . }}, key: password}}
{{- end }}
- {name: WAYLINE_WORLD, value: {{ include "wayline.worldUrl" . | quote }}}
{{- end -}}
{{- end -}}

{{/* Volumes and mounts of the client side of NATS auth (nkey seed) and TLS (the CA). */}}
{{- define "wayline.worldVolumes" -}}
{{- if include "wayline.ownNats" . -}}
{{- if and .Values.nats.auth.secret (eq .Values.nats.auth.type "nkey") }}
- name: nats-auth
  secret: {secretName: {{ .Values.nats.auth.secret }}, items: [{key: seed, path: seed}], defaultMode: 288}  # 0440
{{- end }}
{{- if .Values.nats.tls.secret }}
- name: nats-tls
  secret: {secretName: {{ .Values.nats.tls.secret }}, items: [{key: ca.crt, path: ca.crt}], defaultMode: 292}  # 0444
{{- end }}
{{- end -}}
{{- end -}}
{{- define "wayline.worldMounts" -}}
{{- if include "wayline.ownNats" . -}}
{{- if and .Values.nats.auth.secret (eq .Values.nats.auth.type "nkey") }}
- {name: nats-auth, mountPath: {{ include "wayline.natsAuthDir" . }}, readOnly: true}
{{- end }}
{{- if .Values.nats.tls.secret }}
- {name: nats-tls, mountPath: {{ include "wayline.natsTlsDir" . }}, readOnly: true}
{{- end }}
{{- end -}}
{{- end -}}

{{/* The operator's peering name (kopf), when it runs more than one replica. */}}
{{/* The operator's instance id: operator.instance, else <namespace>.<release> (a label value:
     one too long keeps its first 54 characters and a digest of the whole). */}}
{{- define "wayline.instance" -}}
{{- $id := .Values.operator.instance | default (printf "%s.%s" .Release.Namespace .Release.Name) -}}
{{- if gt (len $id) 63 -}}{{ trunc 54 $id }}-{{ sha256sum $id | trunc 8 }}{{- else -}}{{ $id }}{{- end -}}
{{- end -}}

{{/* The namespaces a namespaced operator watches, one a line: operator.namespaces, else the
     release's own. */}}
{{- define "wayline.operatorNamespaces" -}}
{{- range (.Values.operator.namespaces | default (list .Release.Namespace)) }}
{{ . }}
{{- end -}}
{{- end -}}

{{- define "wayline.peering" -}}
{{- if gt (int .Values.operator.replicas) 1 -}}{{ .Values.operator.peering | default (include "wayline.name" .) }}{{- end -}}
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
{{/* nats-server's configuration file (no secrets: $VARIABLES come from the environment). */}}
{{/* nats.conf, from (dict "root" $ "routePassword" P): P is the routes' password, which the
     chart generates and keeps (nats.yaml). It stands in the route URLs themselves, because
     nats-server expands no environment variable inside a string: so the file is a Secret. */}}
{{- define "wayline.natsConf" -}}
{{- $root := .root -}}
{{- $name := printf "%s-nats" (include "wayline.name" $root) -}}
{{- $replicas := int $root.Values.nats.replicas -}}
server_name: $SERVER_NAME
port: 4222
http_port: 8222
jetstream {
  store_dir: /data
  # quoted: the configuration's parser reads a bare 2m as the number 2,000,000
  sync_interval: {{ $root.Values.nats.syncInterval | quote }}
}
{{- if gt $replicas 1 }}
cluster {
  name: {{ include "wayline.name" $root }}
  port: 6222
  # A route must authenticate: a server that only knows the nodes' addresses cannot join
  # the cluster and read the streams through it.
  authorization {
    user: route
    password: {{ .routePassword | quote }}
    timeout: 2
  }
  routes: [
  {{- range $i := until $replicas }}
    nats://route:{{ $.routePassword }}@{{ $name }}-{{ $i }}.{{ $name }}-headless.{{ $root.Release.Namespace }}.svc:6222
  {{- end }}
  ]
  {{- if $root.Values.nats.tls.secret }}
  # Routes use TLS too, both ways: each node shows the release's certificate (it names
  # *.<release>-wayline-nats-headless) and checks its peer's against the CA.
  tls {
    cert_file: /etc/nats-tls/tls.crt
    key_file: /etc/nats-tls/tls.key
    ca_file: /etc/nats-tls/ca.crt
    verify: true
  }
  {{- end }}
}
{{- end }}
{{- if include "wayline.natsAuthSecret" $root }}
authorization {
  {{- if eq $root.Values.nats.auth.type "password" }}
  user: $NATS_USER
  password: $NATS_PASSWORD
  {{- else }}
  users: [{nkey: $NATS_NKEY}]
  {{- end }}
}
{{- end }}
{{- if $root.Values.nats.tls.secret }}
tls {
  cert_file: /etc/nats-tls/tls.crt
  key_file: /etc/nats-tls/tls.key
}
{{- end }}
{{- end -}}

{{/* The operator's rules on its own resources (a ClusterRole's or each namespace's Role's). */}}
{{- define "wayline.operatorRules" -}}
- apiGroups: [wayline.dev]
  resources: [workflowruns, workflowhooks, workflowschedules, workflowworkers]
  verbs: [get, list, watch, patch, update]
- apiGroups: [wayline.dev]
  resources: [workflowruns]
  verbs: [create, delete]  # a WorkflowSchedule's runs; spec.ttlSecondsAfterFinished, history
- apiGroups: [wayline.dev]
  resources: [workflowruns/status, workflowhooks/status, workflowschedules/status, workflowworkers/status]
  verbs: [get, patch, update]
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, create, patch, delete]  # a WorkflowWorker's versions
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, patch]  # a version's pods' deletion cost before a scale-down
- apiGroups: [""]
  resources: [events]
  verbs: [create]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get]  # spec.inputFrom.configMapKeyRef (a Secret's is granted by name, by you)
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create]
{{- end -}}

{{/* What kopf's scanning reads cluster-wide (namespaces, CRDs): read-only. */}}
{{- define "wayline.discoveryRules" -}}
- apiGroups: [""]
  resources: [namespaces]
  verbs: [get, list, watch]
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [get, list, watch]
{{- end -}}
