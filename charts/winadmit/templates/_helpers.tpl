{{/*
The namespaced objects are named `winadmit`, like the kustomize install.
tests/install/helm.rs renders this chart and manifests/ for the same settings and
compares them object by object.
*/}}

{{/*
The name of the release's cluster-scoped objects (ClusterRoles and their
bindings, webhook configurations): the release name when it contains
"winadmit" (so a release named winadmit keeps the kustomize install's names),
`<release>-winadmit` otherwise. Two releases never share one.
*/}}
{{- define "winadmit.fullname" -}}
{{- if contains "winadmit" .Release.Name -}}
{{ .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else -}}
{{ printf "%s-winadmit" .Release.Name | trunc 63 | trimSuffix "-" }}
{{- end -}}
{{- end }}

{{- define "winadmit.labels" -}}
app.kubernetes.io/name: winadmit
{{- end }}

{{- define "winadmit.selectorLabels" -}}
app.kubernetes.io/name: winadmit
app.kubernetes.io/component: webhook
{{- end }}

{{- define "winadmit.failurePolicy" -}}
{{- if .Values.failurePolicy -}}
{{ .Values.failurePolicy }}
{{- else if eq .Values.mode "audit" -}}
Ignore
{{- else -}}
Fail
{{- end -}}
{{- end }}

{{- define "winadmit.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The policy file the server loads with --policy. */}}
{{- define "winadmit.policy" -}}
{{- if hasKey .Values.policy "mode" -}}
{{- fail "policy.mode: set the chart value `mode` (enforce, warn or audit) instead" -}}
{{- end -}}
{{- if or (hasKey .Values.policy "apiVersion") (hasKey .Values.policy "kind") -}}
{{- fail "policy.apiVersion, policy.kind: the chart sets them; leave them out" -}}
{{- end -}}
apiVersion: winadmit.io/v1alpha1
kind: Policy
mode: {{ .Values.mode }}
{{- $policy := deepCopy .Values.policy }}
{{- $exceptions := get $policy "exceptions" | default dict }}
{{- $_ := set $exceptions "maxLifetimeDays" (int .Values.exceptions.maxLifetimeDays) }}
{{- $_ := set $policy "exceptions" $exceptions }}
{{ toYaml $policy }}
{{- end }}

{{/*
What both webhooks share (manifests/base/webhooks.yaml explains each field).
*/}}
{{- define "winadmit.webhookCommon" -}}
matchPolicy: Equivalent
namespaceSelector:
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values: ["kube-system", {{ .Release.Namespace | quote }}]
    - key: winadmit.io/ignore
      operator: NotIn
      values: ["true"]
{{- if .Values.webhook.matchConditions }}
matchConditions:
  - name: may-target-windows
    expression: |
      (
        has(object.spec) && has(object.spec.jobTemplate) ?
          (has(object.spec.jobTemplate.spec) && has(object.spec.jobTemplate.spec.template) ?
            [object.spec.jobTemplate.spec.template] : [])
        : has(object.spec) && has(object.spec.jobTargetRef) ?
          (has(object.spec.jobTargetRef.template) ? [object.spec.jobTargetRef.template] : [])
        : has(object.spec) && has(object.spec.template) ?
          (has(object.spec.template.spec) ? [object.spec.template]
          : has(object.spec.template.jobTemplate) ?
            (has(object.spec.template.jobTemplate.spec) && has(object.spec.template.jobTemplate.spec.template) ?
              [object.spec.template.jobTemplate.spec.template] : [])
          : has(object.spec.template.broadcastJobTemplate) ?
            (has(object.spec.template.broadcastJobTemplate.spec) &&
              has(object.spec.template.broadcastJobTemplate.spec.template) ?
              [object.spec.template.broadcastJobTemplate.spec.template] : [])
          : [])
        : [object]
      ).exists(p,
        (has(p.metadata) && has(p.metadata.annotations) &&
          'experimental.windows.kubernetes.io/isolation-type' in p.metadata.annotations)
        || (has(p.spec) && [p.spec].exists(s,
        (has(s.nodeSelector) && s.nodeSelector.exists(k,
          ((k == 'kubernetes.io/os' || k == 'beta.kubernetes.io/os') && s.nodeSelector[k] == 'windows')
          || k == 'node.kubernetes.io/windows-build' || k == 'kubernetes.azure.com/os-sku'
          || k == 'cloud.google.com/gke-os-distribution'))
        || (has(s.os) && has(s.os.name) && s.os.name == 'windows')
        || has(s.runtimeClassName)
        || (has(s.nodeName) && s.nodeName != '')
        || (has(s.affinity) && has(s.affinity.nodeAffinity) &&
            has(s.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution) &&
            has(s.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms) &&
            s.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.exists(t,
              has(t.matchExpressions) && t.matchExpressions.exists(e,
                e.key == 'kubernetes.io/os' || e.key == 'beta.kubernetes.io/os'
                || e.key == 'node.kubernetes.io/windows-build' || e.key == 'kubernetes.azure.com/os-sku'
                || e.key == 'cloud.google.com/gke-os-distribution')))
        || (has(s.volumes) && s.volumes.exists(v, has(v.hostPath) && has(v.hostPath.path) &&
            v.hostPath.path.matches('^([A-Za-z]:|\\\\|//)')))
        || (has(s.securityContext) && has(s.securityContext.windowsOptions))
        || [
             has(s.containers) ? s.containers : [],
             has(s.initContainers) ? s.initContainers : [],
             has(s.ephemeralContainers) ? s.ephemeralContainers : []
           ].exists(cs, cs.exists(c,
             (has(c.securityContext) && has(c.securityContext.windowsOptions))
             || (has(c.image) && c.image.matches('(?i)windows|servercore|nanoserver|ltsc|20h2|10\\.0\\.[12][0-9]{4}|dotnet/framework|dotnet-framework|microsoft/(iis|aspnet)'))))
        ))
      )
{{- end }}
failurePolicy: {{ include "winadmit.failurePolicy" . }}
sideEffects: None
admissionReviewVersions: ["v1", "v1beta1"]
timeoutSeconds: 5
{{- end }}

{{/* The webhook's clientConfig for `path`: the Service, or webhook.url. */}}
{{- define "winadmit.clientConfig" -}}
{{- $root := index . 0 -}}
{{- $path := index . 1 -}}
{{- $caBundle := index . 2 -}}
clientConfig:
  {{- if $root.Values.webhook.url }}
  url: {{ printf "%s%s" (trimSuffix "/" $root.Values.webhook.url) $path | quote }}
  {{- else }}
  service:
    name: winadmit
    namespace: {{ $root.Release.Namespace }}
    path: {{ $path }}
    port: 443
  {{- end }}
  {{- with $caBundle }}
  caBundle: {{ . }}
  {{- end }}
{{- end }}

{{/*
The pin-linux.winadmit.io registration of the mutating configuration
(manifests/base/webhooks.yaml explains it): the Linux side of a mixed
cluster, failing open. With webhook.oneCall it calls /admit
(manifests/components/one-call says why). Arguments: the root context and
the caBundle.
*/}}
{{- define "winadmit.pinLinux" -}}
{{- $root := index . 0 -}}
{{- $caBundle := index . 1 -}}
- name: pin-linux.winadmit.io
  {{- include "winadmit.clientConfig" (list $root (ternary "/admit" "/mutate" $root.Values.webhook.oneCall) $caBundle) | nindent 2 }}
  rules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["pods"]
      scope: Namespaced
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["replicationcontrollers"]
      scope: Namespaced
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["deployments", "statefulsets", "daemonsets"]
      scope: Namespaced
    - apiGroups: ["batch"]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["cronjobs"]
      scope: Namespaced
    - apiGroups: ["batch"]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["jobs"]
      scope: Namespaced
  matchPolicy: Equivalent
  namespaceSelector:
    matchExpressions:
      - key: kubernetes.io/metadata.name
        operator: NotIn
        values: ["kube-system", {{ $root.Release.Namespace | quote }}]
      - key: winadmit.io/ignore
        operator: NotIn
        values: ["true"]
  matchConditions:
    - name: selects-no-os
      expression: |
        (
          has(object.spec) && has(object.spec.jobTemplate) ?
            (has(object.spec.jobTemplate.spec) && has(object.spec.jobTemplate.spec.template) ?
              [object.spec.jobTemplate.spec.template] : [])
          : has(object.spec) && has(object.spec.jobTargetRef) ?
            (has(object.spec.jobTargetRef.template) ? [object.spec.jobTargetRef.template] : [])
          : has(object.spec) && has(object.spec.template) ?
            (has(object.spec.template.spec) ? [object.spec.template]
            : has(object.spec.template.jobTemplate) ?
              (has(object.spec.template.jobTemplate.spec) && has(object.spec.template.jobTemplate.spec.template) ?
                [object.spec.template.jobTemplate.spec.template] : [])
            : has(object.spec.template.broadcastJobTemplate) ?
              (has(object.spec.template.broadcastJobTemplate.spec) &&
                has(object.spec.template.broadcastJobTemplate.spec.template) ?
                [object.spec.template.broadcastJobTemplate.spec.template] : [])
            : [])
          : [object]
        ).exists(p, has(p.spec) && [p.spec].exists(s,
          !(has(s.nodeSelector) && ('kubernetes.io/os' in s.nodeSelector || 'beta.kubernetes.io/os' in s.nodeSelector))
          && !(has(s.os) && has(s.os.name))
          && !(has(s.affinity) && has(s.affinity.nodeAffinity) &&
              has(s.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution) &&
              has(s.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms) &&
              s.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.exists(t,
                has(t.matchExpressions) && t.matchExpressions.exists(e,
                  e.key == 'kubernetes.io/os' || e.key == 'beta.kubernetes.io/os')))
        ))
    - name: not-sent-to-mutate
      expression: |
        !(
          (
            has(object.spec) && has(object.spec.jobTemplate) ?
              (has(object.spec.jobTemplate.spec) && has(object.spec.jobTemplate.spec.template) ?
                [object.spec.jobTemplate.spec.template] : [])
            : has(object.spec) && has(object.spec.jobTargetRef) ?
              (has(object.spec.jobTargetRef.template) ? [object.spec.jobTargetRef.template] : [])
            : has(object.spec) && has(object.spec.template) ?
              (has(object.spec.template.spec) ? [object.spec.template]
              : has(object.spec.template.jobTemplate) ?
                (has(object.spec.template.jobTemplate.spec) && has(object.spec.template.jobTemplate.spec.template) ?
                  [object.spec.template.jobTemplate.spec.template] : [])
              : has(object.spec.template.broadcastJobTemplate) ?
                (has(object.spec.template.broadcastJobTemplate.spec) &&
                  has(object.spec.template.broadcastJobTemplate.spec.template) ?
                  [object.spec.template.broadcastJobTemplate.spec.template] : [])
              : [])
            : [object]
          ).exists(p,
            (has(p.metadata) && has(p.metadata.annotations) &&
              'experimental.windows.kubernetes.io/isolation-type' in p.metadata.annotations)
            || (has(p.spec) && [p.spec].exists(s,
            (has(s.nodeSelector) && s.nodeSelector.exists(k,
              ((k == 'kubernetes.io/os' || k == 'beta.kubernetes.io/os') && s.nodeSelector[k] == 'windows')
              || k == 'node.kubernetes.io/windows-build' || k == 'kubernetes.azure.com/os-sku'
              || k == 'cloud.google.com/gke-os-distribution'))
            || (has(s.os) && has(s.os.name) && s.os.name == 'windows')
            || has(s.runtimeClassName)
            || (has(s.nodeName) && s.nodeName != '')
            || (has(s.affinity) && has(s.affinity.nodeAffinity) &&
                has(s.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution) &&
                has(s.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms) &&
                s.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.exists(t,
                  has(t.matchExpressions) && t.matchExpressions.exists(e,
                    e.key == 'kubernetes.io/os' || e.key == 'beta.kubernetes.io/os'
                    || e.key == 'node.kubernetes.io/windows-build' || e.key == 'kubernetes.azure.com/os-sku'
                    || e.key == 'cloud.google.com/gke-os-distribution')))
            || (has(s.volumes) && s.volumes.exists(v, has(v.hostPath) && has(v.hostPath.path) &&
                v.hostPath.path.matches('^([A-Za-z]:|\\\\|//)')))
            || (has(s.securityContext) && has(s.securityContext.windowsOptions))
            || [
                 has(s.containers) ? s.containers : [],
                 has(s.initContainers) ? s.initContainers : [],
                 has(s.ephemeralContainers) ? s.ephemeralContainers : []
               ].exists(cs, cs.exists(c,
                 (has(c.securityContext) && has(c.securityContext.windowsOptions))
                 || (has(c.image) && c.image.matches('(?i)windows|servercore|nanoserver|ltsc|20h2|10\\.0\\.[12][0-9]{4}|dotnet/framework|dotnet-framework|microsoft/(iis|aspnet)'))))
            ))
          )
        )
  failurePolicy: Ignore
  reinvocationPolicy: IfNeeded
  sideEffects: None
  admissionReviewVersions: ["v1", "v1beta1"]
  timeoutSeconds: 2
{{- end }}

{{/*
The ValidatingAdmissionPolicy and binding that refuse a PolicyException
whose expiresAt lies beyond its creationTimestamp plus the longest
lifetime, on CREATE and UPDATE (the API server sets the creation time
before validating admission; the CRD's own rules cannot see it). Every
served version matches (matchPolicy: Equivalent).
*/}}
{{- define "winadmit.exceptionLifetime" -}}
{{- $days := int .Values.exceptions.maxLifetimeDays -}}
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {{ include "winadmit.fullname" . }}-exception-lifetime
  labels:
    {{- include "winadmit.labels" . | nindent 4 }}
spec:
  failurePolicy: Fail
  matchConstraints:
    matchPolicy: Equivalent
    resourceRules:
      - apiGroups: ["winadmit.io"]
        apiVersions: ["*"]
        operations: ["CREATE", "UPDATE"]
        resources: ["policyexceptions"]
  variables:
    - name: longest
      expression: "duration('{{ mul 24 $days }}h')"
  validations:
    - expression: >-
        has(object.spec) && has(object.spec.expiresAt) &&
        timestamp(string(object.spec.expiresAt)) <=
        timestamp(string(object.metadata.creationTimestamp)) + variables.longest
      messageExpression: >-
        'spec.expiresAt ' + (has(object.spec) && has(object.spec.expiresAt) ? string(object.spec.expiresAt) : '(none)') +
        ' lies beyond metadata.creationTimestamp ' + string(object.metadata.creationTimestamp) +
        ' plus the longest lifetime of an exception ({{ $days }} days): a renewal is a new PolicyException'
      reason: Invalid
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {{ include "winadmit.fullname" . }}-exception-lifetime
  labels:
    {{- include "winadmit.labels" . | nindent 4 }}
spec:
  policyName: {{ include "winadmit.fullname" . }}-exception-lifetime
  validationActions: [Deny]
{{- end }}
