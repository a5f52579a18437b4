{{/* Chart name. */}}
{{- define "dmkv.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name prefix of every resource (kept short enough for the suffixes below). */}}
{{- define "dmkv.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "dmkv.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels of a component: include with (list $ "memnode"). */}}
{{- define "dmkv.selectorLabels" -}}
{{- $ := index . 0 -}}
app.kubernetes.io/name: {{ include "dmkv.name" $ }}
app.kubernetes.io/instance: {{ $.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{/* All labels of a component: include with (list $ "memnode"). */}}
{{- define "dmkv.labels" -}}
{{- $ := index . 0 -}}
helm.sh/chart: {{ include "dmkv.chart" $ }}
{{ include "dmkv.selectorLabels" . }}
app.kubernetes.io/version: {{ $.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $.Release.Service }}
app.kubernetes.io/part-of: dmkv
{{- with $.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "dmkv.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "dmkv.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* An image reference: include with (list $ .Values.accel.image); empty fields fall back to .Values.image. */}}
{{- define "dmkv.image" -}}
{{- $ := index . 0 }}
{{- $img := index . 1 }}
{{- $repo := default $.Values.image.repository $img.repository }}
{{- if and (not $img.repository) $.Values.image.digest }}
{{- printf "%s@%s" $repo $.Values.image.digest }}
{{- else }}
{{- $tag := default (default $.Chart.AppVersion $.Values.image.tag) $img.tag }}
{{- printf "%s:%s" $repo $tag }}
{{- end }}
{{- end }}

{{- define "dmkv.pullPolicy" -}}
{{- $ := index . 0 }}
{{- default $.Values.image.pullPolicy (index . 1).pullPolicy }}
{{- end }}

{{- define "dmkv.metadataName" -}}
{{- printf "%s-metadata" (include "dmkv.fullname" .) }}
{{- end }}

{{- define "dmkv.memnodeName" -}}
{{- printf "%s-memnode" (include "dmkv.fullname" .) }}
{{- end }}

{{/* The metadata service's URL inside the cluster. */}}
{{- define "dmkv.metadataUrl" -}}
{{- printf "%s://%s.%s.svc:%d" (include "dmkv.scheme" .) (include "dmkv.metadataName" .) .Release.Namespace (int .Values.metadata.port) }}
{{- end }}

{{/* The scheme of every HTTP API: https with tls.enabled. */}}
{{- define "dmkv.scheme" -}}
{{- if .Values.tls.enabled }}https{{ else }}http{{ end }}
{{- end }}

{{/* The probes' scheme: HTTPS with tls.enabled, else nothing (HTTP). */}}
{{- define "dmkv.probeScheme" -}}
{{- if .Values.tls.enabled }}HTTPS{{ end }}
{{- end }}

{{/* Where the TLS Secret is mounted. */}}
{{- define "dmkv.tlsDir" -}}
/etc/dmkv/tls
{{- end }}

{{/* The TLS Secret's name; fails when TLS is on without one. */}}
{{- define "dmkv.tlsSecretName" -}}
{{- required "tls.secretName is required when tls.enabled is true" .Values.tls.secretName }}
{{- end }}

{{/* Container args serving HTTPS with the mounted certificate, trusting its CA. */}}
{{- define "dmkv.tlsArgs" -}}
{{- if .Values.tls.enabled }}
- --tls-cert-file
- {{ printf "%s/tls.crt" (include "dmkv.tlsDir" .) | quote }}
- --tls-key-file
- {{ printf "%s/tls.key" (include "dmkv.tlsDir" .) | quote }}
- --tls-ca-file
- {{ printf "%s/ca.crt" (include "dmkv.tlsDir" .) | quote }}
{{- end }}
{{- end }}

{{/* The environment of a client of the APIs: the CA it trusts. */}}
{{- define "dmkv.tlsClientEnv" -}}
{{- if .Values.tls.enabled }}
- name: DMKV_TLS_CA_FILE
  value: {{ printf "%s/ca.crt" (include "dmkv.tlsDir" .) | quote }}
{{- end }}
{{- end }}

{{/* The mount of the TLS Secret. */}}
{{- define "dmkv.tlsVolumeMount" -}}
{{- if .Values.tls.enabled }}
- name: tls
  mountPath: {{ include "dmkv.tlsDir" . }}
  readOnly: true
{{- end }}
{{- end }}

{{/* The TLS Secret as a volume. */}}
{{- define "dmkv.tlsVolume" -}}
{{- if .Values.tls.enabled }}
- name: tls
  secret:
    secretName: {{ include "dmkv.tlsSecretName" . }}
{{- end }}
{{- end }}

{{- define "dmkv.accelName" -}}
{{- printf "%s-accel" (include "dmkv.fullname" .) }}
{{- end }}

{{/* The soft switch's admin URL inside the cluster (its headless Service resolves to the
pod's IP). */}}
{{- define "dmkv.accelAdminUrl" -}}
{{- printf "%s://%s.%s.svc:%d" (include "dmkv.scheme" .) (include "dmkv.accelName" .) .Release.Namespace (int .Values.accel.adminPort) }}
{{- end }}

{{/* A startup probe of an HTTP health path: include with (list probe-values path port). */}}
{{- define "dmkv.startupProbe" -}}
{{- $p := index . 0 -}}
httpGet:
  path: {{ index . 1 }}
  port: {{ index . 2 }}
  {{- if and (gt (len .) 3) (index . 3) }}
  scheme: {{ index . 3 }}
  {{- end }}
periodSeconds: {{ $p.periodSeconds }}
failureThreshold: {{ $p.failureThreshold }}
timeoutSeconds: {{ default 1 $p.timeoutSeconds }}
{{- end }}

{{- define "dmkv.secretName" -}}
{{- default (printf "%s-auth" (include "dmkv.fullname" .)) .Values.auth.existingSecret }}
{{- end }}

{{/*
The pod annotation that rolls the pods when the token they read changes: a quoted string
(a bare checksum such as 1718e15309430621 would parse as a YAML number). It is computed
from the token actually in use and never calls randAlphaNum, so every workload and every
render agree: an explicit auth.token hashes that token; an existing Secret hashes its
stored value when the cluster can be asked (else its name and key); a token the chart
generates is kept across upgrades, so its checksum is a constant of the Secret's name
and key and an upgrade or a re-render never rolls the pods for it.
*/}}
{{- define "dmkv.authChecksum" -}}
{{- $key := .Values.auth.secretKey -}}
{{- $source := "" -}}
{{- if .Values.auth.existingSecret -}}
{{- $stored := lookup "v1" "Secret" .Release.Namespace .Values.auth.existingSecret -}}
{{- if and $stored $stored.data (hasKey $stored.data $key) -}}
{{- $source = printf "token:%s" (index $stored.data $key | b64dec) -}}
{{- else -}}
{{- $source = printf "secret:%s/%s" .Values.auth.existingSecret $key -}}
{{- end -}}
{{- else if .Values.auth.token -}}
{{- $source = printf "token:%s" .Values.auth.token -}}
{{- else -}}
{{- $source = printf "generated:%s/%s" (include "dmkv.secretName" .) $key -}}
{{- end -}}
checksum/auth: {{ $source | sha256sum | trunc 16 | quote }}
{{- end }}

{{/* Where pods find the root token: a file from the Secret, never an argument. */}}
{{- define "dmkv.tokenDir" -}}/var/run/secrets/dmkv{{- end }}
{{- define "dmkv.tokenFile" -}}{{ include "dmkv.tokenDir" . }}/token{{- end }}

{{/* The env var naming the token file: include with (list $ "ENV_NAME"). */}}
{{- define "dmkv.tokenFileEnv" -}}
{{- $ := index . 0 -}}
- name: {{ index . 1 }}
  value: {{ include "dmkv.tokenFile" $ | quote }}
{{- end }}

{{/* The volume holding the token file (the Secret's key, owner-read only). */}}
{{- define "dmkv.tokenVolume" -}}
- name: token
  secret:
    secretName: {{ include "dmkv.secretName" . }}
    defaultMode: 0440
    items:
      - key: {{ .Values.auth.secretKey }}
        path: token
{{- end }}

{{/* Its mount. */}}
{{- define "dmkv.tokenMount" -}}
- name: token
  mountPath: {{ include "dmkv.tokenDir" . }}
  readOnly: true
{{- end }}

{{/* The env var carrying the metadata token: include with (list $ "ENV_NAME"). */}}
{{- define "dmkv.tokenEnv" -}}
{{- $ := index . 0 -}}
- name: {{ index . 1 }}
  valueFrom:
    secretKeyRef:
      name: {{ include "dmkv.secretName" $ }}
      key: {{ $.Values.auth.secretKey }}
{{- end }}

{{/* A Kubernetes binary quantity (Mi or Gi) in MiB. */}}
{{- define "dmkv.mebibytes" -}}
{{- if hasSuffix "Gi" . }}
{{- mul (trimSuffix "Gi" . | atoi) 1024 }}
{{- else }}
{{- trimSuffix "Mi" . | atoi }}
{{- end }}
{{- end }}

{{/* The memnode's resources: the user's, plus memory or hugepages-2Mi from the capacity,
and the RDMA device when enabled. */}}
{{- define "dmkv.memnodeResources" -}}
{{- $m := .Values.memnode }}
{{- $res := deepCopy (default dict $m.resources) }}
{{- $requests := default dict $res.requests }}
{{- $limits := default dict $res.limits }}
{{- $capacity := include "dmkv.mebibytes" $m.capacity | atoi }}
{{- $overhead := include "dmkv.mebibytes" $m.memoryOverhead | atoi }}
{{- if $m.hugepages.enabled }}
{{- $_ := set $requests "hugepages-2Mi" $m.capacity }}
{{- $_ := set $limits "hugepages-2Mi" $m.capacity }}
{{- $_ := set $requests "memory" (printf "%dMi" $overhead) }}
{{- $_ := set $limits "memory" (printf "%dMi" $overhead) }}
{{- else }}
{{- $_ := set $requests "memory" (printf "%dMi" (add $capacity $overhead)) }}
{{- $_ := set $limits "memory" (printf "%dMi" (add $capacity $overhead)) }}
{{- end }}
{{- if $m.rdma.enabled }}
{{- $_ := set $requests $m.rdma.resourceName (int $m.rdma.count) }}
{{- $_ := set $limits $m.rdma.resourceName (int $m.rdma.count) }}
{{- end }}
{{- $_ := set $res "requests" $requests }}
{{- $_ := set $res "limits" $limits }}
{{- toYaml $res }}
{{- end }}

{{/* Peers admitted by the NetworkPolicies. */}}
{{- define "dmkv.networkPolicyFrom" -}}
{{- if eq .Values.networkPolicy.from "namespace" }}
- podSelector: {}
{{- else }}
- namespaceSelector: {}
{{- end }}
{{- with .Values.networkPolicy.extraFrom }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Checks of the memnode values that the schema cannot express; fails the render with the
reason.
*/}}
{{- define "dmkv.memnodeChecks" -}}
{{- $m := .Values.memnode }}
{{- if and $m.persistence.enabled $m.hugepages.enabled }}
{{- fail "memnode.persistence.enabled and memnode.hugepages.enabled exclude each other: a region file on a volume is page cache, not huge pages; disable one" }}
{{- end }}
{{- if and $m.zone $m.zoneFromNode }}
{{- fail "memnode.zone and memnode.zoneFromNode exclude each other: set one" }}
{{- end }}
{{- if lt (int $m.replicas) (int .Values.replication) }}
{{- fail (printf "replication %d needs at least %d memnodes, memnode.replicas is %d" (int .Values.replication) (int .Values.replication) (int $m.replicas)) }}
{{- end }}
{{- end }}

{{/*
The memnodes' update strategy type: memnode.updateStrategy, else RollingUpdate with
persistence (a restarted memnode rejoins with its region file) and OnDelete without (it
would come back empty).
*/}}
{{- define "dmkv.memnodeUpdateStrategy" -}}
{{- $m := .Values.memnode }}
{{- if $m.updateStrategy }}
{{- $m.updateStrategy }}
{{- else if $m.persistence.enabled }}
{{- "RollingUpdate" }}
{{- else }}
{{- "OnDelete" }}
{{- end }}
{{- end }}

{{/* The size of a memnode's claim: memnode.persistence.size, else capacity + capacity/8 +
128Mi (the region file's header, the filesystem's reserved blocks, inodes and journal). */}}
{{- define "dmkv.memnodeVolumeSize" -}}
{{- $m := .Values.memnode }}
{{- if $m.persistence.size }}
{{- $m.persistence.size }}
{{- else }}
{{- $capacity := include "dmkv.mebibytes" $m.capacity | atoi }}
{{- printf "%dMi" (add $capacity (div $capacity 8) 128) }}
{{- end }}
{{- end }}

{{/* The memnodes' PodDisruptionBudget maxUnavailable: the value when given, else
replication - 1. */}}
{{- define "dmkv.memnodeMaxUnavailable" -}}
{{- $given := .Values.memnode.podDisruptionBudget.maxUnavailable }}
{{- if or (kindIs "string" $given) (kindIs "invalid" $given) }}
{{- if $given }}
{{- $given | quote }}
{{- else }}
{{- sub (int .Values.replication) 1 }}
{{- end }}
{{- else }}
{{- int $given }}
{{- end }}
{{- end }}

{{/*
The memnode's readiness check: the metadata service's GET /v1/memnodes lists a memnode
named like this pod that is healthy (registered, heartbeating). bash only (the image's
base has it): /dev/tcp for the request, a regular expression for the answer, the object
of one memnode being the text between its braces up to its regions.
*/}}
{{- define "dmkv.memnodeRegisteredScript" -}}
{{- $host := printf "%s.%s.svc" (include "dmkv.metadataName" .) .Release.Namespace -}}
{{- $port := int .Values.metadata.port -}}
token=$(< "$DMKV_MEMNODE_METADATA_TOKEN_FILE") || exit 1
exec 3<>/dev/tcp/{{ $host }}/{{ $port }} || exit 1
printf 'GET /v1/memnodes HTTP/1.0\r\nHost: {{ $host }}:{{ $port }}\r\nAuthorization: Bearer %s\r\n\r\n' "$token" >&3
IFS= read -r -d '' -u 3 reply
[[ $reply == HTTP/1.[01]' 200 '* ]] || exit 1
me="\"name\":\"$POD_NAME\""
ok='"healthy":true'
re="$me[^{}]*$ok|$ok[^{}]*$me"
[[ $reply =~ $re ]]
{{- end }}

{{/*
The volume holding the memory node admin token and the grant key as files
(mounted at /etc/dmkv/auth by the memnode and metadata pods).
*/}}
{{- define "dmkv.authFilesVolume" -}}
- name: auth
  secret:
    secretName: {{ include "dmkv.secretName" . }}
    defaultMode: 0440
    items:
      - key: {{ .Values.auth.memnodeTokenKey }}
        path: {{ .Values.auth.memnodeTokenKey }}
      - key: {{ .Values.auth.grantKeyKey }}
        path: {{ .Values.auth.grantKeyKey }}
{{- end }}
