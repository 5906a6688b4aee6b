{{/*
fullname is the prefix of every object's name: the release name, or
<release>-network-plugin-policy when the release name does not contain the chart's name;
fullnameOverride wins. Installed as release "network-plugin-policy", the names are those of
config/default.
*/}}
{{- define "npp.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* selectorLabels select the manager's pods (as config/default does: one manager per cluster). */}}
{{- define "npp.selectorLabels" -}}
app.kubernetes.io/name: network-plugin-policy
{{- end -}}

{{/* labels are on every object the chart renders. */}}
{{- define "npp.labels" -}}
{{ include "npp.selectorLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* image is the manager's image reference: repository@digest, or repository:tag. */}}
{{- define "npp.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* certManager is "true" in cert-manager mode; it fails on an unknown mode. */}}
{{- define "npp.certManager" -}}
{{- if eq .Values.certificates.mode "cert-manager" -}}
true
{{- else if ne .Values.certificates.mode "self" -}}
{{- fail (printf "certificates.mode: %q is not one of self or cert-manager" .Values.certificates.mode) -}}
{{- end -}}
{{- end -}}

{{/*
webhookAnnotations are the annotations of both webhook configurations: in cert-manager mode,
cert-manager's CA injector fills their caBundle from the Certificate.
*/}}
{{- define "npp.webhookAnnotations" -}}
{{- if include "npp.certManager" . }}
cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include "npp.fullname" . }}-webhook-cert
{{- end -}}
{{- end -}}

{{/*
npp.liveMatchConditions renders, as YAML, the matchConditions of the webhook entry named
(index . 3) in the live webhook configuration of kind (index . 1) named
<fullname>-(index . 2), when the cluster has one with conditions for that entry (Helm's lookup:
nothing under helm template or --dry-run=client, and the templates then render the built-in
defaults). The manager's leader writes those conditions from the policies in force; rendering
the live ones makes helm upgrade's three-way merge leave them as they are, so that
Kubernetes-HostPort never leaves the sync entry (failurePolicy Fail) during an upgrade
(TestChartInstallsTheManagerAsPods records the entry at each write).
*/}}
{{- define "npp.liveMatchConditions" -}}
{{- $live := lookup "admissionregistration.k8s.io/v1" (index . 1) "" (printf "%s-%s" (include "npp.fullname" (index . 0)) (index . 2)) -}}
{{- range (dig "webhooks" list $live) -}}
{{- if and (eq .name (index $ 3)) .matchConditions -}}
{{- toYaml .matchConditions -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
npp.providerConfig is "true" when the chart renders the provider configuration ConfigMap:
providerConfig.enabled, or providerConfig.cloudProviders set (a cloud table would otherwise
render nothing, silently, and the manager would serve no cloud type). Empty otherwise.
*/}}
{{- define "npp.providerConfig" -}}
{{- if or .Values.providerConfig.enabled (trim (.Values.providerConfig.cloudProviders | default "")) -}}
true
{{- end -}}
{{- end }}
