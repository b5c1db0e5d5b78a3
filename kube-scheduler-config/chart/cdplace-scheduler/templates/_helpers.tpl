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

{{/* The policy instances' most memory in MiB: plugin.args.maxPolicyInstances ×
plugin.args.guestMemoryLimitMiB (the plugin's defaults 16 and 512 where unset). */}}
{{- define "cdplace-scheduler.guestMiB" -}}
{{- $guest := 512 -}}
{{- if and (hasKey .Values.plugin.args "guestMemoryLimitMiB") (not (kindIs "invalid" .Values.plugin.args.guestMemoryLimitMiB)) -}}
{{- $guest = int .Values.plugin.args.guestMemoryLimitMiB -}}
{{- end -}}
{{- $instances := 16 -}}
{{- if and (hasKey .Values.plugin.args "maxPolicyInstances") (not (kindIs "invalid" .Values.plugin.args.maxPolicyInstances)) -}}
{{- $instances = int .Values.plugin.args.maxPolicyInstances -}}
{{- end -}}
{{- mul $instances $guest -}}
{{- end -}}

{{/* memory.baseMiB + the policy instances' most memory, in Mi. */}}
{{- define "cdplace-scheduler.memoryLimit" -}}
{{- printf "%dMi" (add (int .Values.memory.baseMiB) (int (include "cdplace-scheduler.guestMiB" .))) -}}
{{- end -}}

{{/* GOMEMLIMIT in MiB: goMemLimitPercent of the memory that is Go's, memory.baseMiB (or of a
resources.limits.memory given in Mi or Gi, less the policy instances' memory); 0 for none. */}}
{{- define "cdplace-scheduler.goMemLimitMiB" -}}
{{- $pct := int (default 0 .Values.memory.goMemLimitPercent) -}}
{{- $base := int .Values.memory.baseMiB -}}
{{- with .Values.resources.limits -}}
{{- with .memory -}}
{{- $q := toString . -}}
{{- $mi := 0 -}}
{{- if hasSuffix "Gi" $q -}}{{- $mi = mul (int (trimSuffix "Gi" $q)) 1024 -}}
{{- else if hasSuffix "Mi" $q -}}{{- $mi = int (trimSuffix "Mi" $q) -}}
{{- else -}}{{- fail (printf "resources.limits.memory %q: give it in Mi or Gi (the chart derives GOMEMLIMIT from it)" $q) -}}
{{- end -}}
{{- $base = sub $mi (int (include "cdplace-scheduler.guestMiB" $)) -}}
{{- if lt $base 128 -}}
{{- fail (printf "resources.limits.memory %s leaves %dMi beside the policy instances' %sMi (plugin.args.maxPolicyInstances x guestMemoryLimitMiB); give at least 128Mi more" $q $base (include "cdplace-scheduler.guestMiB" $)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- div (mul $base $pct) 100 -}}
{{- end -}}

{{/* The pods' PriorityClass (system-cluster-critical unless set; the chart creates none). */}}
{{- define "cdplace-scheduler.priorityClassName" -}}
{{- .Values.priorityClassName -}}
{{- end -}}

{{/* Whether the pods go to the control-plane nodes ("true" or ""). */}}
{{- define "cdplace-scheduler.onControlPlane" -}}
{{- $p := .Values.nodePlacement.controlPlane -}}
{{- if or (eq $p "controlPlane") (and (eq $p "auto") (eq .Values.mode "singleScheduler")) -}}true{{- end -}}
{{- end -}}

{{/* The Service's DNS name, which a TLS certificate for the secure port names. */}}
{{- define "cdplace-scheduler.serviceHost" -}}
{{- printf "%s.%s.svc" (include "cdplace-scheduler.fullname" .) .Release.Namespace -}}
{{- end -}}

{{/* The feature gates as kube-scheduler's --feature-gates value, sorted. */}}
{{- define "cdplace-scheduler.featureGates" -}}
{{- $gates := list -}}
{{- range $k := keys .Values.featureGates | sortAlpha -}}
{{- $gates = append $gates (printf "%s=%t" $k (get $.Values.featureGates $k)) -}}
{{- end -}}
{{- join "," $gates -}}
{{- end -}}

{{/* The plugin args: plugin.args, with policy and shadowPolicy from the chart's ConfigMap sources. */}}
{{- define "cdplace-scheduler.pluginArgs" -}}
{{- $args := deepCopy .Values.plugin.args -}}
{{- range $field, $src := dict "policy" .Values.policy "shadowPolicy" .Values.shadowPolicy -}}
{{- if $src.configMap -}}
{{- $_ := set $args $field (dict "source" "configMap" "namespace" $.Release.Namespace "name" $src.configMap "key" $src.key) -}}
{{- end -}}
{{- end -}}
{{- if .Values.record.enabled -}}
{{- $_ := set $args "recordPath" (include "cdplace-scheduler.recordPath" .) -}}
{{- end -}}
{{- toYaml $args -}}
{{- end -}}

{{/* Where record.enabled mounts the recorder's emptyDir. */}}
{{- define "cdplace-scheduler.recordPath" -}}
/var/lib/cdplace/record
{{- end -}}

{{/* The ConfigMaps the policy sources name (the scheduler reads only these). */}}
{{- define "cdplace-scheduler.policyConfigMaps" -}}
{{- $names := list -}}
{{- range $src := list .Values.policy .Values.shadowPolicy -}}
{{- if $src.configMap }}{{ $names = append $names $src.configMap }}{{ end -}}
{{- end -}}
{{- join "," (uniq $names) -}}
{{- end -}}

{{/* Refuses values the schema cannot express. */}}
{{- define "cdplace-scheduler.validate" -}}
{{- range $field := list "policy" "shadowPolicy" -}}
{{- if and (get $.Values $field).configMap (hasKey $.Values.plugin.args $field) -}}
{{- fail (printf "set %s.configMap or plugin.args.%s, not both (%s.configMap is plugin.args.%s {source: configMap} in the release namespace, with the RBAC to read it)" $field $field $field $field) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.record.enabled (hasKey .Values.plugin.args "recordPath") -}}
{{- fail "set record.enabled or plugin.args.recordPath, not both (record.enabled is plugin.args.recordPath on an emptyDir the chart mounts)" -}}
{{- end -}}
{{- if eq .Values.leaderElection.leaseName "kube-scheduler" -}}
{{- fail "leaderElection.leaseName must not be kube-scheduler: that is the stock scheduler's lease, and holding it would stop (or be stopped by) the cluster's default scheduler" -}}
{{- end -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) -}}
{{- fail (printf "replicas is %d but leaderElection.enabled is false: replicas without leader election would all schedule at once" (int .Values.replicas)) -}}
{{- end -}}
{{- /* Flags kube-scheduler ignores when it reads --config (cmd/kube-scheduler/app/options/deprecated.go),
and flags the chart sets from its values. */ -}}
{{- $ignored := dict "--kube-api-qps" "clientConnection.qps" "--kube-api-burst" "clientConnection.burst" "--kube-api-content-type" "nothing (the chart's default, protobuf, is kube-scheduler's)" "--kubeconfig" "nothing (the pod uses its ServiceAccount)" "--profiling" "nothing (profiling stays off: enableProfiling false)" "--contention-profiling" "nothing (profiling stays off)" -}}
{{- $owned := dict "--config" "the chart's ConfigMap" "--secure-port" "securePort" "--feature-gates" "featureGates" "--v" "logVerbosity" "-v" "logVerbosity" "--tls-cert-file" "tlsSecretName" "--tls-private-key-file" "tlsSecretName" -}}
{{- range .Values.extraArgs -}}
{{- $flag := regexReplaceAll "=.*$" . "" -}}
{{- if hasKey $ignored $flag -}}
{{- fail (printf "extraArgs: %s is ignored by kube-scheduler when it reads --config, as the chart runs it; set %s instead" $flag (get $ignored $flag)) -}}
{{- end -}}
{{- if hasKey $owned $flag -}}
{{- fail (printf "extraArgs: %s is set by the chart from %s; set that value instead" $flag (get $owned $flag)) -}}
{{- end -}}
{{- if or (hasPrefix "--leader-elect" $flag) (hasPrefix "--lock-object" $flag) -}}
{{- fail (printf "extraArgs: %s would override the chart's leader election (leaderElection.*, and the lease kube-system/kube-scheduler in singleScheduler mode); set leaderElection instead" $flag) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.serviceMonitor.enabled (not .Values.service.enabled) -}}
{{- fail "serviceMonitor.enabled needs service.enabled: the ServiceMonitor scrapes through the chart's Service" -}}
{{- end -}}
{{- if and .Values.serviceMonitor.enabled (not .Values.serviceMonitor.tlsConfig.ca) (not .Values.serviceMonitor.tlsConfig.insecureSkipVerify) -}}
{{- fail "serviceMonitor: Prometheus cannot verify the scheduler's certificate: set tlsSecretName (a certificate for <release>.<namespace>.svc) and serviceMonitor.tlsConfig.ca (the CA that signed it), or, to scrape without verifying the self-signed default, serviceMonitor.tlsConfig.insecureSkipVerify=true" -}}
{{- end -}}
{{- if and .Values.serviceMonitor.enabled (not .Values.serviceMonitor.authorization.credentials.name) (not .Values.serviceMonitor.authorization.createToken) -}}
{{- fail "serviceMonitor: no token for Prometheus to send: set serviceMonitor.authorization.credentials.name (a Secret with a token allowed get on /metrics) or serviceMonitor.authorization.createToken=true" -}}
{{- end -}}
{{- if and .Values.serviceMonitor.enabled .Values.serviceMonitor.authorization.createToken (not .Values.rbac.metricsReader) -}}
{{- fail "serviceMonitor.authorization.createToken binds the metrics-reader ClusterRole: it needs rbac.metricsReader=true" -}}
{{- end -}}
{{- if eq .Values.schedulerName "default-scheduler" -}}
{{- fail "schedulerName must not be default-scheduler: that is the stock scheduler's profile (mode: singleScheduler serves it beside computedomain-scheduler)" -}}
{{- end -}}
{{- end -}}
