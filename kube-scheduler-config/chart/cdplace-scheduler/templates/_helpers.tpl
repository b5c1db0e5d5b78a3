{{/*
Names, labels, the image reference and the computed memory limit of the cdplace-scheduler chart.
*/}}

{{/* The release's full name: the release name, or <release>-<chart> when it lacks the chart's name. */}}
{{- define "cdplace-scheduler.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "cdplace-scheduler.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "cdplace-scheduler.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "cdplace-scheduler.labels" -}}
helm.sh/chart: {{ include "cdplace-scheduler.chart" . }}
{{ include "cdplace-scheduler.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: cdplace
{{- end -}}

{{- define "cdplace-scheduler.serviceAccountName" -}}
{{- default (include "cdplace-scheduler.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* repository@digest when a digest is given, repository:tag (default appVersion) otherwise. */}}
{{- define "cdplace-scheduler.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* memory.baseMiB + plugin.args.maxPolicyInstances × plugin.args.guestMemoryLimitMiB (the
plugin's defaults 16 and 512 where unset), in Mi: the most the policy's instances can hold. */}}
{{- define "cdplace-scheduler.memoryLimit" -}}
{{- $guest := 512 -}}
{{- if and (hasKey .Values.plugin.args "guestMemoryLimitMiB") (not (kindIs "invalid" .Values.plugin.args.guestMemoryLimitMiB)) -}}
{{- $guest = int .Values.plugin.args.guestMemoryLimitMiB -}}
{{- end -}}
{{- $instances := 16 -}}
{{- if and (hasKey .Values.plugin.args "maxPolicyInstances") (not (kindIs "invalid" .Values.plugin.args.maxPolicyInstances)) -}}
{{- $instances = int .Values.plugin.args.maxPolicyInstances -}}
{{- end -}}
{{- printf "%dMi" (add (int .Values.memory.baseMiB) (mul $instances $guest)) -}}
{{- end -}}

{{/* The feature gates as kube-scheduler's --feature-gates value, sorted. */}}
{{- define "cdplace-scheduler.featureGates" -}}
{{- $gates := list -}}
{{- range $k := keys .Values.featureGates | sortAlpha -}}
{{- $gates = append $gates (printf "%s=%t" $k (get $.Values.featureGates $k)) -}}
{{- end -}}
{{- join "," $gates -}}
{{- end -}}

{{/* Refuses values the schema cannot express. */}}
{{- define "cdplace-scheduler.validate" -}}
{{- if eq .Values.leaderElection.leaseName "kube-scheduler" -}}
{{- fail "leaderElection.leaseName must not be kube-scheduler: that is the stock scheduler's lease, and holding it would stop (or be stopped by) the cluster's default scheduler" -}}
{{- end -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) -}}
{{- fail (printf "replicas is %d but leaderElection.enabled is false: replicas without leader election would all schedule at once" (int .Values.replicas)) -}}
{{- end -}}
{{- if eq .Values.schedulerName "default-scheduler" -}}
{{- fail "schedulerName must not be default-scheduler: that is the stock scheduler's profile (mode: singleScheduler serves it beside computedomain-scheduler)" -}}
{{- end -}}
{{- end -}}
