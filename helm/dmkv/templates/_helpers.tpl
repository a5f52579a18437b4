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
{{- printf "http://%s.%s.svc:%d" (include "dmkv.metadataName" .) .Release.Namespace (int .Values.metadata.port) }}
{{- end }}

{{- define "dmkv.secretName" -}}
{{- default (printf "%s-auth" (include "dmkv.fullname" .)) .Values.auth.existingSecret }}
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
