{{/* The chart's name: app.kubernetes.io/name of the webhook's objects. */}}
{{- define "placement-webhook.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The webhook's objects' name: fullnameOverride, else the release name when it contains the chart's
name, else <release>-<name>.
*/}}
{{- define "placement-webhook.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "placement-webhook.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels every object carries besides app.kubernetes.io/name. */}}
{{- define "placement-webhook.commonLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: placement-webhook
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ include "placement-webhook.chart" . }}
{{- end }}

{{- define "placement-webhook.labels" -}}
app.kubernetes.io/name: {{ include "placement-webhook.name" . }}
{{ include "placement-webhook.commonLabels" . }}
{{- end }}

{{/* What the Deployment, Service, PodDisruptionBudget and ServiceMonitor select. */}}
{{- define "placement-webhook.selectorLabels" -}}
app.kubernetes.io/name: {{ include "placement-webhook.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The second scheduler's objects (schedulerProfile). */}}
{{- define "placement-webhook.schedulerLabels" -}}
app.kubernetes.io/name: {{ .Values.schedulerProfile.schedulerName }}
{{ include "placement-webhook.commonLabels" . }}
{{- end }}

{{- define "placement-webhook.schedulerSelectorLabels" -}}
app.kubernetes.io/name: {{ .Values.schedulerProfile.schedulerName }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Where the second scheduler's KubeSchedulerConfiguration is mounted, in both Deployments. */}}
{{- define "placement-webhook.schedulerConfigDir" -}}
/etc/placement-scheduler
{{- end }}

{{/*
The webhook's config.yaml: config, plus what the chart knows better than a fixed file: with
schedulerProfile.enabled the mode, scheduler name and the scheduler's config file; with the
heat bands kept (placement-webhook.heatBands) the bands on, else off; and the
webhook's own Service when it is not the default name `placement-webhook`.
*/}}
{{- define "placement-webhook.config" -}}
{{- $config := deepCopy .Values.config }}
{{- $fullname := include "placement-webhook.fullname" . }}
{{- if and (ne $fullname "placement-webhook") (not (hasKey $config "service")) }}
{{- $_ := set $config "service" $fullname }}
{{- end }}
{{- if .Values.schedulerProfile.enabled }}
{{- $_ := set $config "mode" .Values.schedulerProfile.mode }}
{{- $_ := set $config "scheduler_name" .Values.schedulerProfile.schedulerName }}
{{- $_ := set $config "scheduler_config_file" (printf "%s/scheduler-config.yaml" (include "placement-webhook.schedulerConfigDir" .)) }}
{{- end }}
{{- $placement := default (dict) (get $config "placement") }}
{{- $bands := default (dict) (get $placement "heat_bands") }}
{{- $_ := set $bands "enabled" (eq (include "placement-webhook.heatBands" .) "true") }}
{{- $_ := set $placement "heat_bands" $bands }}
{{- $_ := set $config "placement" $placement }}
{{- toYaml $config }}
{{- end }}

{{/*
"true" when the heat bands are kept: heatBands.enabled, on a cluster whose apiserver enforces
ValidatingAdmissionPolicy v1 (1.30 or later: without the policy the node patch right would be
unguarded), and not under the scheduler profile (it scores every node: nothing to grade).
*/}}
{{- define "placement-webhook.heatBands" -}}
{{- if and .Values.heatBands.enabled (not .Values.schedulerProfile.enabled) (semverCompare ">=1.30.0-0" .Capabilities.KubeVersion.Version) -}}
true
{{- end }}
{{- end }}

{{/* The node label the heat bands are kept in: config.placement.heat_bands.key, or its default. */}}
{{- define "placement-webhook.heatBandKey" -}}
{{- $placement := default (dict) .Values.config.placement }}
{{- $bands := default (dict) (get $placement "heat_bands") }}
{{- default "placement-webhook.io/heat-band" (get $bands "key") }}
{{- end }}

{{/* How many heat bands the config keeps (placement.heat_bands.bands, default 16). */}}
{{- define "placement-webhook.heatBandCount" -}}
{{- $placement := default (dict) .Values.config.placement }}
{{- $bands := default (dict) (get $placement "heat_bands") }}
{{- default 16 (get $bands "bands") }}
{{- end }}

{{/* The second scheduler's KubeSchedulerConfiguration, read by it and by the webhook. */}}
{{- define "placement-webhook.schedulerConfig" -}}
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  # Its own lease: `kube-scheduler` in kube-system belongs to the default scheduler.
  leaderElect: true
  resourceLock: leases
  resourceName: {{ .Values.schedulerProfile.schedulerName }}
  resourceNamespace: {{ .Release.Namespace }}
  retryPeriod: {{ .Values.schedulerProfile.leaderElection.retryPeriod }}
clientConnection:
  qps: {{ .Values.schedulerProfile.clientConnection.qps }}
  burst: {{ .Values.schedulerProfile.clientConnection.burst }}
profiles:
  - schedulerName: {{ .Values.schedulerProfile.schedulerName }}
    # Score every feasible node: no sample, so the node the webhook prefers is always scored.
    percentageOfNodesToScore: {{ .Values.schedulerProfile.percentageOfNodesToScore }}
{{- end }}
