"""Request bodies in Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`).

kubectl's typed clients send protobuf and accept JSON back: Namespaces (`kubectl create
namespace`), DeleteOptions and Evictions (`kubectl drain`), Pods (`kubectl debug
--copy-to`, `kubectl debug node/X`). The apiserver reads these and always answers in
JSON. The wire format: the magic `k8s\\0`, then a `runtime.Unknown` message whose `raw`
field holds the object.

Every message is decoded from a table of its fields, with kube's field numbers from the
`generated.proto` files (k8s.io/api core/v1 and policy/v1, k8s.io/apimachinery meta/v1,
runtime, api/resource, util/intstr). What a field is in Go matters: kube's marshaller
writes every non-pointer field, even at its zero value ("" or 0 or false or an empty
message), and a pointer field only when it is set, even to a zero value. So a non-pointer
zero is dropped as JSON's `omitempty` would, a pointer is kept whatever its value.

A field the server does not decode from protobuf, or a field number no table names, is
refused with a 415 that names it, unless it holds a non-pointer zero value (which says
nothing): what the server cannot read is never silently dropped.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from common import errors

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

Field = tuple[int, int | bytes]  # (field number, varint or length-delimited payload)

# -- the wire format ---------------------------------------------------------------------


def fields(buf: bytes) -> Iterator[Field]:
    """(field number, value) of each field: ints for varints, bytes for length-delimited."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, pos = _varint(buf, pos)
            yield number, value
        elif wire_type == 2:
            length, pos = _varint(buf, pos)
            if pos + length > len(buf):
                raise ValueError("truncated field")
            yield number, buf[pos:pos + length]
            pos += length
        elif wire_type in (1, 5):  # fixed64, fixed32: no kube type uses them
            raise ValueError(f"field {number} has wire type {wire_type}, which no Kubernetes "
                             f"message uses")
        else:
            raise ValueError(f"unsupported wire type {wire_type}")


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        if shift > 63:
            raise ValueError("varint too long")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _signed(value: int) -> int:
    """int32 and int64 are sent as 64-bit two's complement varints."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


def _packed(raw: bytes) -> list[int]:
    out, pos = [], 0
    while pos < len(raw):
        value, pos = _varint(raw, pos)
        out.append(_signed(value))
    return out


# -- message tables ----------------------------------------------------------------------

# Kinds of field: a scalar, a message (by name), or one of kube's well-known messages.
STRING, INT, BOOL = "string", "int", "bool"
QUANTITY = "Quantity"  # resource.Quantity {string string = 1}, as its string
TIME = "Time"  # meta/v1 Time {int64 seconds = 1; int32 nanos = 2}, as RFC 3339
INT_OR_STRING = "IntOrString"  # intstr {int64 type = 1; int32 intVal = 2; string strVal = 3}
STRING_MAP = "map<string,string>"
QUANTITY_MAP = "map<string,Quantity>"
BYTES_MAP = "map<string,bytes>"  # a Secret's data, ConfigMap's binaryData: base64 in JSON
BYTES = "bytes"  # []byte: base64 in JSON
FIELDS_V1 = "FieldsV1"  # meta/v1 FieldsV1 {bytes Raw = 1}: the JSON object it holds


@dataclass(frozen=True, slots=True)
class F:
    """One field of a message: its JSON name, kind, and how Go holds it."""

    name: str
    kind: str  # STRING, INT, BOOL, QUANTITY, TIME, INT_OR_STRING, a map, or a message name
    repeated: bool = False
    pointer: bool = False  # a Go pointer: present means set, even to its zero value
    inline: bool = False  # an embedded struct (json:",inline"): its fields are the parent's
    decoded: bool = True  # False: the server does not read it from protobuf


def ptr(name: str, kind: str) -> F:
    return F(name, kind, pointer=True)


def rep(name: str, kind: str) -> F:
    return F(name, kind, repeated=True)


def refused(name: str, kind: str = "", *, pointer: bool = False, repeated: bool = False) -> F:
    return F(name, kind, pointer=pointer, repeated=repeated, decoded=False)


# Field numbers as in kube's generated.proto (the comment names the file of each block).
MESSAGES: dict[str, dict[int, F]] = {
    # apimachinery pkg/apis/meta/v1
    "ObjectMeta": {
        1: F("name", STRING), 2: F("generateName", STRING), 3: F("namespace", STRING),
        4: F("selfLink", STRING), 5: F("uid", STRING), 6: F("resourceVersion", STRING),
        7: F("generation", INT), 8: F("creationTimestamp", TIME),
        9: ptr("deletionTimestamp", TIME), 10: ptr("deletionGracePeriodSeconds", INT),
        11: F("labels", STRING_MAP), 12: F("annotations", STRING_MAP),
        13: rep("ownerReferences", "OwnerReference"), 14: rep("finalizers", STRING),
        15: refused("clusterName", STRING), 17: rep("managedFields", "ManagedFieldsEntry")},
    # what a client read back and sends again in an update (kubectl certificate approve)
    "ManagedFieldsEntry": {1: F("manager", STRING), 2: F("operation", STRING),
                           3: F("apiVersion", STRING), 4: ptr("time", TIME),
                           6: F("fieldsType", STRING), 7: ptr("fieldsV1", FIELDS_V1),
                           8: F("subresource", STRING)},
    "OwnerReference": {
        5: F("apiVersion", STRING), 1: F("kind", STRING), 3: F("name", STRING),
        4: F("uid", STRING), 6: ptr("controller", BOOL), 7: ptr("blockOwnerDeletion", BOOL)},
    "DeleteOptions": {
        1: ptr("gracePeriodSeconds", INT), 2: ptr("preconditions", "Preconditions"),
        3: ptr("orphanDependents", BOOL), 4: ptr("propagationPolicy", STRING),
        5: rep("dryRun", STRING)},
    "Preconditions": {1: ptr("uid", STRING), 2: ptr("resourceVersion", STRING)},
    "LabelSelector": {1: F("matchLabels", STRING_MAP),
                      2: rep("matchExpressions", "LabelSelectorRequirement")},
    "LabelSelectorRequirement": {1: F("key", STRING), 2: F("operator", STRING),
                                 3: rep("values", STRING)},
    # api authorization/v1 and authentication/v1: the reviews kubectl auth sends (a
    # client's status is refused unless empty)
    "SelfSubjectAccessReview": {1: F("metadata", "ObjectMeta"),
                                2: F("spec", "SelfSubjectAccessReviewSpec"),
                                3: F("status", "SubjectAccessReviewStatus")},
    "SelfSubjectAccessReviewSpec": {1: ptr("resourceAttributes", "ResourceAttributes"),
                                    2: ptr("nonResourceAttributes", "NonResourceAttributes")},
    "SubjectAccessReview": {1: F("metadata", "ObjectMeta"),
                            2: F("spec", "SubjectAccessReviewSpec"),
                            3: F("status", "SubjectAccessReviewStatus")},
    "LocalSubjectAccessReview": {1: F("metadata", "ObjectMeta"),
                                 2: F("spec", "SubjectAccessReviewSpec"),
                                 3: F("status", "SubjectAccessReviewStatus")},
    "SubjectAccessReviewSpec": {1: ptr("resourceAttributes", "ResourceAttributes"),
                                2: ptr("nonResourceAttributes", "NonResourceAttributes"),
                                3: F("user", STRING), 4: rep("groups", STRING),
                                5: refused("extra", repeated=True), 6: F("uid", STRING)},
    "ResourceAttributes": {1: F("namespace", STRING), 2: F("verb", STRING),
                           3: F("group", STRING), 4: F("version", STRING),
                           5: F("resource", STRING), 6: F("subresource", STRING),
                           7: F("name", STRING), 8: refused("fieldSelector", pointer=True),
                           9: refused("labelSelector", pointer=True)},
    "NonResourceAttributes": {1: F("path", STRING), 2: F("verb", STRING)},
    "SubjectAccessReviewStatus": {1: refused("allowed", BOOL), 4: refused("denied", BOOL),
                                  2: refused("reason", STRING),
                                  3: refused("evaluationError", STRING)},
    "SelfSubjectRulesReview": {1: F("metadata", "ObjectMeta"),
                               2: F("spec", "SelfSubjectRulesReviewSpec"),
                               3: refused("status", "SubjectRulesReviewStatus")},
    "SelfSubjectRulesReviewSpec": {1: F("namespace", STRING)},
    "SubjectRulesReviewStatus": {1: refused("resourceRules", repeated=True),
                                 2: refused("nonResourceRules", repeated=True),
                                 3: refused("incomplete", BOOL),
                                 4: refused("evaluationError", STRING)},
    "SelfSubjectReview": {1: F("metadata", "ObjectMeta"),
                          2: refused("status", "SelfSubjectReviewStatus")},
    "SelfSubjectReviewStatus": {1: refused("userInfo", "UserInfo")},
    # api core/v1 ServiceAccount (`kubectl create serviceaccount`)
    "ServiceAccount": {1: F("metadata", "ObjectMeta"), 2: rep("secrets", "ObjectReference"),
                       3: rep("imagePullSecrets", "LocalObjectReference"),
                       4: ptr("automountServiceAccountToken", BOOL)},
    "ObjectReference": {1: F("kind", STRING), 2: F("namespace", STRING), 3: F("name", STRING),
                        4: F("uid", STRING), 5: F("apiVersion", STRING),
                        6: F("resourceVersion", STRING), 7: F("fieldPath", STRING)},
    # api authentication/v1 TokenRequest (serviceaccounts/token, `kubectl create token`)
    "TokenRequest": {1: F("metadata", "ObjectMeta"), 2: F("spec", "TokenRequestSpec"),
                     3: F("status", "TokenRequestStatus")},
    "TokenRequestSpec": {1: rep("audiences", STRING), 4: ptr("expirationSeconds", INT),
                         3: ptr("boundObjectRef", "BoundObjectReference")},
    "BoundObjectReference": {1: F("kind", STRING), 2: F("apiVersion", STRING),
                             3: F("name", STRING), 4: F("uid", STRING)},
    "TokenRequestStatus": {1: refused("token", STRING),
                           2: refused("expirationTimestamp", TIME)},
    "UserInfo": {1: refused("username", STRING), 2: refused("uid", STRING),
                 3: refused("groups", repeated=True), 4: refused("extra", repeated=True)},
    # api rbac/v1 (kubectl create role, clusterrole, rolebinding, clusterrolebinding)
    "Role": {1: F("metadata", "ObjectMeta"), 2: rep("rules", "PolicyRule")},
    "ClusterRole": {1: F("metadata", "ObjectMeta"), 2: rep("rules", "PolicyRule"),
                    3: ptr("aggregationRule", "AggregationRule")},
    "AggregationRule": {1: rep("clusterRoleSelectors", "LabelSelector")},
    "PolicyRule": {1: rep("verbs", STRING), 2: rep("apiGroups", STRING),
                   3: rep("resources", STRING), 4: rep("resourceNames", STRING),
                   5: rep("nonResourceURLs", STRING)},
    "RoleBinding": {1: F("metadata", "ObjectMeta"), 2: rep("subjects", "Subject"),
                    3: F("roleRef", "RoleRef")},
    "ClusterRoleBinding": {1: F("metadata", "ObjectMeta"), 2: rep("subjects", "Subject"),
                           3: F("roleRef", "RoleRef")},
    "Subject": {1: F("kind", STRING), 2: F("apiGroup", STRING), 3: F("name", STRING),
                4: F("namespace", STRING)},
    "RoleRef": {1: F("apiGroup", STRING), 2: F("kind", STRING), 3: F("name", STRING)},
    # api policy/v1
    "Eviction": {1: F("metadata", "ObjectMeta"), 2: ptr("deleteOptions", "DeleteOptions")},
    # api core/v1
    "Namespace": {1: F("metadata", "ObjectMeta"), 2: F("spec", "NamespaceSpec"),
                  3: refused("status", "NamespaceStatus")},
    "NamespaceSpec": {1: rep("finalizers", STRING)},
    # Status is the server's to set: a client's is refused unless it is empty (every field
    # at its zero value, as kube writes an unset status).
    "NamespaceStatus": {1: refused("phase", STRING), 2: refused("conditions", repeated=True)},
    "PodStatus": {
        1: refused("phase", STRING), 2: refused("conditions", repeated=True),
        3: refused("message", STRING), 4: refused("reason", STRING),
        11: refused("nominatedNodeName", STRING), 5: refused("hostIP", STRING),
        16: refused("hostIPs", repeated=True), 6: refused("podIP", STRING),
        12: refused("podIPs", repeated=True), 7: refused("startTime", pointer=True),
        10: refused("initContainerStatuses", repeated=True),
        8: refused("containerStatuses", repeated=True), 9: refused("qosClass", STRING),
        13: refused("ephemeralContainerStatuses", repeated=True),
        14: refused("resize", STRING), 15: refused("resourceClaimStatuses", repeated=True),
        18: refused("extendedResourceClaimStatus", pointer=True),
        19: refused("allocatedResources", repeated=True),
        20: refused("resources", pointer=True), 17: refused("observedGeneration", INT)},
    "Pod": {1: F("metadata", "ObjectMeta"), 2: F("spec", "PodSpec"),
            3: refused("status", "PodStatus")},
    "PodSpec": {
        1: rep("volumes", "Volume"), 20: rep("initContainers", "Container"),
        2: rep("containers", "Container"),
        34: refused("ephemeralContainers", repeated=True),
        3: F("restartPolicy", STRING), 4: ptr("terminationGracePeriodSeconds", INT),
        5: ptr("activeDeadlineSeconds", INT), 6: F("dnsPolicy", STRING),
        7: F("nodeSelector", STRING_MAP), 8: F("serviceAccountName", STRING),
        9: F("serviceAccount", STRING), 21: ptr("automountServiceAccountToken", BOOL),
        10: F("nodeName", STRING), 11: F("hostNetwork", BOOL), 12: F("hostPID", BOOL),
        13: F("hostIPC", BOOL), 27: ptr("shareProcessNamespace", BOOL),
        14: ptr("securityContext", "PodSecurityContext"),
        15: rep("imagePullSecrets", "LocalObjectReference"), 16: F("hostname", STRING),
        17: F("subdomain", STRING), 18: ptr("affinity", "Affinity"),
        19: F("schedulerName", STRING), 22: rep("tolerations", "Toleration"),
        23: rep("hostAliases", "HostAlias"), 24: F("priorityClassName", STRING),
        25: ptr("priority", INT), 26: ptr("dnsConfig", "PodDNSConfig"),
        28: rep("readinessGates", "PodReadinessGate"), 29: ptr("runtimeClassName", STRING),
        30: ptr("enableServiceLinks", BOOL), 31: ptr("preemptionPolicy", STRING),
        32: F("overhead", QUANTITY_MAP),
        33: rep("topologySpreadConstraints", "TopologySpreadConstraint"),
        35: ptr("setHostnameAsFQDN", BOOL), 36: ptr("os", "PodOS"),
        37: ptr("hostUsers", BOOL), 38: rep("schedulingGates", "PodSchedulingGate"),
        39: refused("resourceClaims", repeated=True),
        40: ptr("resources", "ResourceRequirements"),
        41: refused("hostnameOverride", STRING, pointer=True),
        42: refused("workloadRef", pointer=True)},
    "Container": {
        1: F("name", STRING), 2: F("image", STRING), 3: rep("command", STRING),
        4: rep("args", STRING), 5: F("workingDir", STRING), 6: rep("ports", "ContainerPort"),
        19: rep("envFrom", "EnvFromSource"), 7: rep("env", "EnvVar"),
        8: F("resources", "ResourceRequirements"),
        23: rep("resizePolicy", "ContainerResizePolicy"), 24: ptr("restartPolicy", STRING),
        25: refused("restartPolicyRules", repeated=True),
        9: rep("volumeMounts", "VolumeMount"), 21: rep("volumeDevices", "VolumeDevice"),
        10: ptr("livenessProbe", "Probe"), 11: ptr("readinessProbe", "Probe"),
        22: ptr("startupProbe", "Probe"), 12: ptr("lifecycle", "Lifecycle"),
        13: F("terminationMessagePath", STRING), 20: F("terminationMessagePolicy", STRING),
        14: F("imagePullPolicy", STRING), 15: ptr("securityContext", "SecurityContext"),
        16: F("stdin", BOOL), 17: F("stdinOnce", BOOL), 18: F("tty", BOOL)},
    "ContainerPort": {1: F("name", STRING), 2: F("hostPort", INT), 3: F("containerPort", INT),
                      4: F("protocol", STRING), 5: F("hostIP", STRING)},
    "ContainerResizePolicy": {1: F("resourceName", STRING), 2: F("restartPolicy", STRING)},
    "EnvVar": {1: F("name", STRING), 2: F("value", STRING),
               3: ptr("valueFrom", "EnvVarSource")},
    "EnvVarSource": {1: ptr("fieldRef", "ObjectFieldSelector"),
                     2: ptr("resourceFieldRef", "ResourceFieldSelector"),
                     3: ptr("configMapKeyRef", "ConfigMapKeySelector"),
                     4: ptr("secretKeyRef", "SecretKeySelector"),
                     5: refused("fileKeyRef", pointer=True)},
    "ObjectFieldSelector": {1: F("apiVersion", STRING), 2: F("fieldPath", STRING)},
    "ResourceFieldSelector": {1: F("containerName", STRING), 2: F("resource", STRING),
                              3: F("divisor", QUANTITY)},
    "ConfigMapKeySelector": {1: F("", "LocalObjectReference", inline=True),
                             2: F("key", STRING), 3: ptr("optional", BOOL)},
    "SecretKeySelector": {1: F("", "LocalObjectReference", inline=True), 2: F("key", STRING),
                          3: ptr("optional", BOOL)},
    "EnvFromSource": {1: F("prefix", STRING), 2: ptr("configMapRef", "ConfigMapEnvSource"),
                      3: ptr("secretRef", "SecretEnvSource")},
    "ConfigMapEnvSource": {1: F("", "LocalObjectReference", inline=True),
                           2: ptr("optional", BOOL)},
    "SecretEnvSource": {1: F("", "LocalObjectReference", inline=True),
                        2: ptr("optional", BOOL)},
    "LocalObjectReference": {1: F("name", STRING)},
    "ResourceRequirements": {1: F("limits", QUANTITY_MAP), 2: F("requests", QUANTITY_MAP),
                             3: rep("claims", "ResourceClaim")},
    "ResourceClaim": {1: F("name", STRING), 2: F("request", STRING)},
    "VolumeMount": {1: F("name", STRING), 2: F("readOnly", BOOL),
                    7: ptr("recursiveReadOnly", STRING), 3: F("mountPath", STRING),
                    4: F("subPath", STRING), 5: ptr("mountPropagation", STRING),
                    6: F("subPathExpr", STRING)},
    "VolumeDevice": {1: F("name", STRING), 2: F("devicePath", STRING)},
    "Probe": {1: F("", "ProbeHandler", inline=True), 2: F("initialDelaySeconds", INT),
              3: F("timeoutSeconds", INT), 4: F("periodSeconds", INT),
              5: F("successThreshold", INT), 6: F("failureThreshold", INT),
              7: ptr("terminationGracePeriodSeconds", INT)},
    "ProbeHandler": {1: ptr("exec", "ExecAction"), 2: ptr("httpGet", "HTTPGetAction"),
                     3: ptr("tcpSocket", "TCPSocketAction"), 4: ptr("grpc", "GRPCAction")},
    "Lifecycle": {1: ptr("postStart", "LifecycleHandler"),
                  2: ptr("preStop", "LifecycleHandler"), 3: ptr("stopSignal", STRING)},
    "LifecycleHandler": {1: ptr("exec", "ExecAction"), 2: ptr("httpGet", "HTTPGetAction"),
                         3: ptr("tcpSocket", "TCPSocketAction"),
                         4: refused("sleep", pointer=True)},
    "ExecAction": {1: rep("command", STRING)},
    "HTTPGetAction": {1: F("path", STRING), 2: F("port", INT_OR_STRING), 3: F("host", STRING),
                      4: F("scheme", STRING), 5: rep("httpHeaders", "HTTPHeader")},
    "HTTPHeader": {1: F("name", STRING), 2: F("value", STRING)},
    "TCPSocketAction": {1: F("port", INT_OR_STRING), 2: F("host", STRING)},
    "GRPCAction": {1: F("port", INT), 2: ptr("service", STRING)},
    "SecurityContext": {
        1: ptr("capabilities", "Capabilities"), 2: ptr("privileged", BOOL),
        3: ptr("seLinuxOptions", "SELinuxOptions"), 10: refused("windowsOptions", pointer=True),
        4: ptr("runAsUser", INT), 8: ptr("runAsGroup", INT), 5: ptr("runAsNonRoot", BOOL),
        6: ptr("readOnlyRootFilesystem", BOOL), 7: ptr("allowPrivilegeEscalation", BOOL),
        9: ptr("procMount", STRING), 11: ptr("seccompProfile", "SeccompProfile"),
        12: refused("appArmorProfile", pointer=True), 13: refused("ulimits", repeated=True)},
    "Capabilities": {1: rep("add", STRING), 2: rep("drop", STRING)},
    "SELinuxOptions": {1: F("user", STRING), 2: F("role", STRING), 3: F("type", STRING),
                       4: F("level", STRING)},
    "SeccompProfile": {1: F("type", STRING), 2: ptr("localhostProfile", STRING)},
    "PodSecurityContext": {
        1: ptr("seLinuxOptions", "SELinuxOptions"), 8: refused("windowsOptions", pointer=True),
        2: ptr("runAsUser", INT), 6: ptr("runAsGroup", INT), 3: ptr("runAsNonRoot", BOOL),
        4: rep("supplementalGroups", INT), 12: ptr("supplementalGroupsPolicy", STRING),
        5: ptr("fsGroup", INT), 7: rep("sysctls", "Sysctl"),
        9: ptr("fsGroupChangePolicy", STRING), 10: ptr("seccompProfile", "SeccompProfile"),
        11: refused("appArmorProfile", pointer=True),
        13: ptr("seLinuxChangePolicy", STRING)},
    "Sysctl": {1: F("name", STRING), 2: F("value", STRING)},
    "Toleration": {1: F("key", STRING), 2: F("operator", STRING), 3: F("value", STRING),
                   4: F("effect", STRING), 5: ptr("tolerationSeconds", INT)},
    "Affinity": {1: ptr("nodeAffinity", "NodeAffinity"), 2: ptr("podAffinity", "PodAffinity"),
                 3: ptr("podAntiAffinity", "PodAffinity")},
    "NodeAffinity": {
        1: ptr("requiredDuringSchedulingIgnoredDuringExecution", "NodeSelector"),
        2: rep("preferredDuringSchedulingIgnoredDuringExecution", "PreferredSchedulingTerm")},
    "NodeSelector": {1: rep("nodeSelectorTerms", "NodeSelectorTerm")},
    "NodeSelectorTerm": {1: rep("matchExpressions", "NodeSelectorRequirement"),
                         2: rep("matchFields", "NodeSelectorRequirement")},
    "NodeSelectorRequirement": {1: F("key", STRING), 2: F("operator", STRING),
                                3: rep("values", STRING)},
    "PreferredSchedulingTerm": {1: F("weight", INT), 2: F("preference", "NodeSelectorTerm")},
    # PodAntiAffinity has PodAffinity's fields and numbers
    "PodAffinity": {
        1: rep("requiredDuringSchedulingIgnoredDuringExecution", "PodAffinityTerm"),
        2: rep("preferredDuringSchedulingIgnoredDuringExecution", "WeightedPodAffinityTerm")},
    "PodAffinityTerm": {1: ptr("labelSelector", "LabelSelector"), 2: rep("namespaces", STRING),
                        3: F("topologyKey", STRING),
                        4: ptr("namespaceSelector", "LabelSelector"),
                        5: rep("matchLabelKeys", STRING), 6: rep("mismatchLabelKeys", STRING)},
    "WeightedPodAffinityTerm": {1: F("weight", INT), 2: F("podAffinityTerm", "PodAffinityTerm")},
    "TopologySpreadConstraint": {
        1: F("maxSkew", INT), 2: F("topologyKey", STRING), 3: F("whenUnsatisfiable", STRING),
        4: ptr("labelSelector", "LabelSelector"), 5: ptr("minDomains", INT),
        6: ptr("nodeAffinityPolicy", STRING), 7: ptr("nodeTaintsPolicy", STRING),
        8: rep("matchLabelKeys", STRING)},
    "HostAlias": {1: F("ip", STRING), 2: rep("hostnames", STRING)},
    "PodDNSConfig": {1: rep("nameservers", STRING), 2: rep("searches", STRING),
                     3: rep("options", "PodDNSConfigOption")},
    "PodDNSConfigOption": {1: F("name", STRING), 2: ptr("value", STRING)},
    "PodReadinessGate": {1: F("conditionType", STRING)},
    "PodOS": {1: F("name", STRING)},
    "PodSchedulingGate": {1: F("name", STRING)},
    "Volume": {1: F("name", STRING), 2: F("", "VolumeSource", inline=True)},
    "VolumeSource": {
        1: ptr("hostPath", "HostPathVolumeSource"), 2: ptr("emptyDir", "EmptyDirVolumeSource"),
        3: refused("gcePersistentDisk", pointer=True),
        4: refused("awsElasticBlockStore", pointer=True), 5: refused("gitRepo", pointer=True),
        6: ptr("secret", "SecretVolumeSource"), 7: refused("nfs", pointer=True),
        8: refused("iscsi", pointer=True), 9: refused("glusterfs", pointer=True),
        10: refused("persistentVolumeClaim", pointer=True), 11: refused("rbd", pointer=True),
        12: refused("flexVolume", pointer=True), 13: refused("cinder", pointer=True),
        14: refused("cephfs", pointer=True), 15: refused("flocker", pointer=True),
        16: ptr("downwardAPI", "DownwardAPIVolumeSource"), 17: refused("fc", pointer=True),
        18: refused("azureFile", pointer=True), 19: ptr("configMap", "ConfigMapVolumeSource"),
        20: refused("vsphereVolume", pointer=True), 21: refused("quobyte", pointer=True),
        22: refused("azureDisk", pointer=True),
        23: refused("photonPersistentDisk", pointer=True),
        26: ptr("projected", "ProjectedVolumeSource"),
        24: refused("portworxVolume", pointer=True), 25: refused("scaleIO", pointer=True),
        27: refused("storageos", pointer=True), 28: refused("csi", pointer=True),
        29: refused("ephemeral", pointer=True), 30: refused("image", pointer=True)},
    "HostPathVolumeSource": {1: F("path", STRING), 2: ptr("type", STRING)},
    "EmptyDirVolumeSource": {1: F("medium", STRING), 2: ptr("sizeLimit", QUANTITY)},
    "SecretVolumeSource": {1: F("secretName", STRING), 2: rep("items", "KeyToPath"),
                           3: ptr("defaultMode", INT), 4: ptr("optional", BOOL)},
    "ConfigMapVolumeSource": {1: F("", "LocalObjectReference", inline=True),
                              2: rep("items", "KeyToPath"), 3: ptr("defaultMode", INT),
                              4: ptr("optional", BOOL)},
    "KeyToPath": {1: F("key", STRING), 2: F("path", STRING), 3: ptr("mode", INT)},
    "DownwardAPIVolumeSource": {1: rep("items", "DownwardAPIVolumeFile"),
                                2: ptr("defaultMode", INT)},
    "DownwardAPIVolumeFile": {1: F("path", STRING), 2: ptr("fieldRef", "ObjectFieldSelector"),
                              3: ptr("resourceFieldRef", "ResourceFieldSelector"),
                              4: ptr("mode", INT)},
    "ProjectedVolumeSource": {1: rep("sources", "VolumeProjection"),
                              2: ptr("defaultMode", INT)},
    "VolumeProjection": {1: ptr("secret", "SecretProjection"),
                         2: ptr("downwardAPI", "DownwardAPIProjection"),
                         3: ptr("configMap", "ConfigMapProjection"),
                         4: ptr("serviceAccountToken", "ServiceAccountTokenProjection"),
                         5: refused("clusterTrustBundle", pointer=True),
                         6: refused("podCertificate", pointer=True)},
    "SecretProjection": {1: F("", "LocalObjectReference", inline=True),
                         2: rep("items", "KeyToPath"), 4: ptr("optional", BOOL)},
    "ConfigMapProjection": {1: F("", "LocalObjectReference", inline=True),
                            2: rep("items", "KeyToPath"), 4: ptr("optional", BOOL)},
    "DownwardAPIProjection": {1: rep("items", "DownwardAPIVolumeFile")},
    "ServiceAccountTokenProjection": {1: F("audience", STRING),
                                      2: ptr("expirationSeconds", INT), 3: F("path", STRING)},
    # api core/v1 ConfigMap and Secret (kubectl create configmap, kubectl create secret)
    "ConfigMap": {1: F("metadata", "ObjectMeta"), 4: ptr("immutable", BOOL),
                  2: F("data", STRING_MAP), 3: F("binaryData", BYTES_MAP)},
    "Secret": {1: F("metadata", "ObjectMeta"), 5: ptr("immutable", BOOL),
               2: F("data", BYTES_MAP), 4: F("stringData", STRING_MAP), 3: F("type", STRING)},
    # api core/v1 Service (kubectl create service, kubectl expose)
    "Service": {1: F("metadata", "ObjectMeta"), 2: F("spec", "ServiceSpec"),
                3: F("status", "ServiceStatus")},
    "ServiceSpec": {1: rep("ports", "ServicePort"), 2: F("selector", STRING_MAP),
                    3: F("clusterIP", STRING), 18: rep("clusterIPs", STRING),
                    4: F("type", STRING), 5: rep("externalIPs", STRING),
                    7: F("sessionAffinity", STRING), 8: F("loadBalancerIP", STRING),
                    9: rep("loadBalancerSourceRanges", STRING), 10: F("externalName", STRING),
                    11: F("externalTrafficPolicy", STRING), 12: F("healthCheckNodePort", INT),
                    13: F("publishNotReadyAddresses", BOOL),
                    14: ptr("sessionAffinityConfig", "SessionAffinityConfig"),
                    19: rep("ipFamilies", STRING), 17: ptr("ipFamilyPolicy", STRING),
                    20: ptr("allocateLoadBalancerNodePorts", BOOL),
                    21: ptr("loadBalancerClass", STRING),
                    22: ptr("internalTrafficPolicy", STRING),
                    23: ptr("trafficDistribution", STRING)},
    "ServicePort": {1: F("name", STRING), 2: F("protocol", STRING),
                    6: ptr("appProtocol", STRING), 3: F("port", INT),
                    4: F("targetPort", INT_OR_STRING), 5: F("nodePort", INT)},
    "SessionAffinityConfig": {1: ptr("clientIP", "ClientIPConfig")},
    "ClientIPConfig": {1: ptr("timeoutSeconds", INT)},
    "ServiceStatus": {1: F("loadBalancer", "LoadBalancerStatus"),
                      2: refused("conditions", repeated=True)},
    "LoadBalancerStatus": {1: refused("ingress", repeated=True)},
    # api discovery/v1 EndpointSlice
    "EndpointSlice": {1: F("metadata", "ObjectMeta"), 4: F("addressType", STRING),
                      2: rep("endpoints", "Endpoint"), 3: rep("ports", "EndpointPort")},
    "Endpoint": {1: rep("addresses", STRING), 2: F("conditions", "EndpointConditions"),
                 3: ptr("hostname", STRING), 4: ptr("targetRef", "ObjectReference"),
                 5: F("deprecatedTopology", STRING_MAP), 6: ptr("nodeName", STRING),
                 7: ptr("zone", STRING), 8: refused("hints", pointer=True)},
    "EndpointConditions": {1: ptr("ready", BOOL), 2: ptr("serving", BOOL),
                           3: ptr("terminating", BOOL)},
    "EndpointPort": {1: ptr("name", STRING), 2: ptr("protocol", STRING), 3: ptr("port", INT),
                     4: ptr("appProtocol", STRING)},
    # api apps/v1 and batch/v1 (kubectl create deployment, kubectl create job)
    "PodTemplateSpec": {1: F("metadata", "ObjectMeta"), 2: F("spec", "PodSpec")},
    "Deployment": {1: F("metadata", "ObjectMeta"), 2: F("spec", "DeploymentSpec"),
                   3: refused("status", "DeploymentStatus")},
    "DeploymentSpec": {1: ptr("replicas", INT), 2: ptr("selector", "LabelSelector"),
                       3: F("template", "PodTemplateSpec"),
                       4: F("strategy", "DeploymentStrategy"), 5: F("minReadySeconds", INT),
                       6: ptr("revisionHistoryLimit", INT), 7: F("paused", BOOL),
                       9: ptr("progressDeadlineSeconds", INT)},
    "DeploymentStrategy": {1: F("type", STRING),
                           2: ptr("rollingUpdate", "RollingUpdateDeployment")},
    "RollingUpdateDeployment": {1: ptr("maxUnavailable", INT_OR_STRING),
                                2: ptr("maxSurge", INT_OR_STRING)},
    "DeploymentStatus": {1: refused("observedGeneration", INT), 2: refused("replicas", INT),
                         3: refused("updatedReplicas", INT), 7: refused("readyReplicas", INT),
                         4: refused("availableReplicas", INT),
                         5: refused("unavailableReplicas", INT),
                         9: refused("terminatingReplicas", INT, pointer=True),
                         6: refused("conditions", repeated=True),
                         8: refused("collisionCount", INT, pointer=True)},
    "ReplicaSet": {1: F("metadata", "ObjectMeta"), 2: F("spec", "ReplicaSetSpec"),
                   3: refused("status", "ReplicaSetStatus")},
    "ReplicaSetSpec": {1: ptr("replicas", INT), 4: F("minReadySeconds", INT),
                       2: ptr("selector", "LabelSelector"),
                       3: F("template", "PodTemplateSpec")},
    "ReplicaSetStatus": {1: refused("replicas", INT), 2: refused("fullyLabeledReplicas", INT),
                         4: refused("readyReplicas", INT), 5: refused("availableReplicas", INT),
                         7: refused("terminatingReplicas", INT, pointer=True),
                         3: refused("observedGeneration", INT),
                         6: refused("conditions", repeated=True)},
    "Job": {1: F("metadata", "ObjectMeta"), 2: F("spec", "JobSpec"),
            3: refused("status", "JobStatus")},
    "JobSpec": {1: ptr("parallelism", INT), 2: ptr("completions", INT),
                3: ptr("activeDeadlineSeconds", INT),
                11: refused("podFailurePolicy", pointer=True),
                16: refused("successPolicy", pointer=True), 7: ptr("backoffLimit", INT),
                12: ptr("backoffLimitPerIndex", INT), 13: ptr("maxFailedIndexes", INT),
                4: ptr("selector", "LabelSelector"), 5: ptr("manualSelector", BOOL),
                6: F("template", "PodTemplateSpec"), 8: ptr("ttlSecondsAfterFinished", INT),
                9: ptr("completionMode", STRING), 10: ptr("suspend", BOOL),
                14: ptr("podReplacementPolicy", STRING), 15: ptr("managedBy", STRING)},
    "JobStatus": {1: refused("conditions", repeated=True), 2: refused("startTime", pointer=True),
                  3: refused("completionTime", pointer=True), 4: refused("active", INT),
                  5: refused("succeeded", INT), 6: refused("failed", INT),
                  7: refused("completedIndexes", STRING),
                  10: refused("failedIndexes", pointer=True),
                  8: refused("uncountedTerminatedPods", pointer=True),
                  11: refused("terminating", pointer=True), 9: refused("ready", pointer=True)},
    # k8s.io/api certificates/v1 (`kubectl certificate approve` and `deny` send these)
    "CertificateSigningRequest": {1: F("metadata", "ObjectMeta"),
                                  2: F("spec", "CertificateSigningRequestSpec"),
                                  3: F("status", "CertificateSigningRequestStatus")},
    "CertificateSigningRequestSpec": {1: F("request", BYTES), 7: F("signerName", STRING),
                                      8: ptr("expirationSeconds", INT), 5: rep("usages", STRING),
                                      2: F("username", STRING), 3: F("uid", STRING),
                                      4: rep("groups", STRING),
                                      6: refused("extra", repeated=True)},
    "CertificateSigningRequestStatus": {
        1: rep("conditions", "CertificateSigningRequestCondition"),
        2: F("certificate", BYTES)},
    "CertificateSigningRequestCondition": {1: F("type", STRING), 6: F("status", STRING),
                                           2: F("reason", STRING), 3: F("message", STRING),
                                           4: F("lastUpdateTime", TIME),
                                           5: F("lastTransitionTime", TIME)},
}

# -- decoding ----------------------------------------------------------------------------


class Unreadable(Exception):
    """A field the server does not read from protobuf (a 415 naming it)."""


def decode_message(name: str, raw: bytes, path: str) -> dict[str, Any]:
    """One message as the JSON-shaped dict the server works on; `path` names it in errors."""
    table = MESSAGES[name]
    out: dict[str, Any] = {}
    for number, value in fields(raw):
        spec = table.get(number)
        if spec is None:
            raise Unreadable(f"{_shown(path)} has field number {number}, which is not a field "
                             f"of {name} this server knows")
        field_path = f"{path}.{spec.name}" if spec.name else path
        if not spec.decoded:
            if spec.kind in MESSAGES and not (spec.pointer or spec.repeated):
                # a struct kube always writes: fine while every field in it is zero
                decode_message(spec.kind, _bytes(value, field_path), field_path)
            elif spec.pointer or spec.repeated or not _is_zero(value):
                raise Unreadable(f"{_shown(field_path)} is not supported in protobuf request "
                                 f"bodies by this server")
            continue
        if spec.repeated and spec.kind in MESSAGES:
            field_path += f"[{len(out.get(spec.name, []))}]"
        _set(out, spec, _value(spec, value, field_path))
    return out


def _shown(path: str) -> str:
    return path.lstrip(".") or "the object"


def _is_zero(value: int | bytes) -> bool:
    return value == 0 or value == b""


def _set(out: dict[str, Any], spec: F, value: Any) -> None:
    if spec.inline:
        out.update(value)
    elif spec.repeated:
        if isinstance(value, list):  # packed integers
            out.setdefault(spec.name, []).extend(value)
        else:
            out.setdefault(spec.name, []).append(value)
    elif spec.kind in (STRING_MAP, QUANTITY_MAP, BYTES_MAP):
        key, item = value
        out.setdefault(spec.name, {})[key] = item
    elif spec.pointer or not _omitted(value):
        out[spec.name] = value


def _omitted(value: Any) -> bool:
    """A non-pointer field at its zero value, which JSON's omitempty leaves out."""
    return value in ("", 0, False, None) or value == {}


def _value(spec: F, value: int | bytes, path: str) -> Any:
    kind = spec.kind
    if kind == INT:
        if isinstance(value, bytes):
            if not spec.repeated:
                raise ValueError(f"{path}: expected an integer")
            return _packed(value)
        return _signed(value)
    if kind == BOOL:
        if not isinstance(value, int):
            raise ValueError(f"{path}: expected a boolean")
        return bool(value)
    raw = _bytes(value, path)
    if kind == STRING:
        return _text(raw, path)
    if kind == QUANTITY:
        return quantity(raw, path)
    if kind == TIME:
        return timestamp(raw, path)
    if kind == INT_OR_STRING:
        return int_or_string(raw, path)
    if kind == STRING_MAP:
        key, item = _map_entry(raw, path)
        return _text(key, path), _text(item, f"{path}[{_text(key, path)}]")
    if kind == QUANTITY_MAP:
        key, item = _map_entry(raw, path)
        return _text(key, path), quantity(item, f"{path}[{_text(key, path)}]")
    if kind == BYTES_MAP:
        key, item = _map_entry(raw, path)
        return _text(key, path), base64.b64encode(item).decode()
    if kind == BYTES:
        return base64.b64encode(raw).decode()
    if kind == FIELDS_V1:
        return fields_v1(raw, path)
    return decode_message(kind, raw, path)


def _bytes(value: int | bytes, path: str) -> bytes:
    if not isinstance(value, bytes):
        raise ValueError(f"{path}: expected a length-delimited field")
    return value


def _text(raw: bytes, path: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: invalid UTF-8") from None


def _map_entry(raw: bytes, path: str) -> tuple[bytes, bytes]:
    key, item = b"", b""
    for number, value in fields(raw):
        if number == 1:
            key = _bytes(value, path)
        elif number == 2:
            item = _bytes(value, path)
        else:
            raise ValueError(f"{path}: a map entry has field {number}")
    return key, item


def fields_v1(raw: bytes, path: str) -> Any:
    for number, value in fields(raw):
        if number != 1:
            raise Unreadable(f"{_shown(path)} has field number {number}, which is not a field "
                             "of FieldsV1 this server knows")
        try:
            return json.loads(_bytes(value, path))
        except ValueError:
            raise ValueError(f"{path}: not a JSON object") from None
    return {}


def quantity(raw: bytes, path: str) -> str:
    text = ""
    for number, value in fields(raw):
        if number != 1:
            raise Unreadable(f"{_shown(path)} has field number {number}, which is not a "
                             f"field of Quantity")
        text = _text(_bytes(value, path), path)
    return text


def timestamp(raw: bytes, path: str) -> str | None:
    """RFC 3339 in UTC, as kube writes times; None for the zero time (an empty message)."""
    seconds = nanos = 0
    for number, value in fields(raw):
        if number == 1 and isinstance(value, int):
            seconds = _signed(value)
        elif number == 2 and isinstance(value, int):
            nanos = _signed(value)
        else:
            raise ValueError(f"{path}: not a Time")
    if not seconds and not nanos:
        return None
    try:
        moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=seconds)
    except OverflowError:
        raise ValueError(f"{path}: time out of range") from None
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def int_or_string(raw: bytes, path: str) -> int | str:
    kind, number, text = 0, 0, ""
    for field_number, value in fields(raw):
        if field_number == 1 and isinstance(value, int):
            kind = _signed(value)
        elif field_number == 2 and isinstance(value, int):
            number = _signed(value)
        elif field_number == 3 and isinstance(value, bytes):
            text = _text(value, path)
        else:
            raise ValueError(f"{path}: not an IntOrString")
    if kind not in (0, 1):
        raise ValueError(f"{path}: IntOrString of unknown type {kind}")
    return text if kind == 1 else number


# -- the envelope ------------------------------------------------------------------------

# The kinds read from protobuf, and the group versions each is served in.
KINDS: dict[str, tuple[str, ...]] = {
    "Namespace": ("v1",),
    "Pod": ("v1",),
    "ServiceAccount": ("v1",),
    "DeleteOptions": (),  # every group version serves it (checked by the caller)
    "Eviction": ("policy/v1", "policy/v1beta1"),
    "Role": ("rbac.authorization.k8s.io/v1",),
    "ClusterRole": ("rbac.authorization.k8s.io/v1",),
    "RoleBinding": ("rbac.authorization.k8s.io/v1",),
    "ClusterRoleBinding": ("rbac.authorization.k8s.io/v1",),
    "SelfSubjectAccessReview": ("authorization.k8s.io/v1",),
    "SubjectAccessReview": ("authorization.k8s.io/v1",),
    "LocalSubjectAccessReview": ("authorization.k8s.io/v1",),
    "SelfSubjectRulesReview": ("authorization.k8s.io/v1",),
    "SelfSubjectReview": ("authentication.k8s.io/v1",),
    "TokenRequest": ("authentication.k8s.io/v1",),
    "ConfigMap": ("v1",),
    "Secret": ("v1",),
    "Deployment": ("apps/v1",),
    "ReplicaSet": ("apps/v1",),
    "Job": ("batch/v1",),
    "Service": ("v1",),
    "EndpointSlice": ("discovery.k8s.io/v1",),
    "CertificateSigningRequest": ("certificates.k8s.io/v1",),
}


def unknown_envelope(body: bytes) -> tuple[str, str, bytes]:
    """(apiVersion, kind, raw) of a `k8s\\0` + runtime.Unknown body (runtime's
    generated.proto: Unknown {TypeMeta typeMeta = 1; bytes raw = 2; string contentEncoding
    = 3; string contentType = 4}, TypeMeta {string apiVersion = 1; string kind = 2})."""
    if not body.startswith(MAGIC):
        raise errors.BadRequest("provided protobuf body does not start with the 'k8s\\x00' "
                                "prefix")
    api_version = kind = ""
    raw = b""
    for number, value in fields(body[len(MAGIC):]):
        if number == 1:
            for meta_number, meta_value in fields(_bytes(value, "typeMeta")):
                if meta_number == 1:
                    api_version = _text(_bytes(meta_value, "apiVersion"), "apiVersion")
                elif meta_number == 2:
                    kind = _text(_bytes(meta_value, "kind"), "kind")
        elif number == 2:
            raw = _bytes(value, "raw")
        elif number == 3:
            encoding = _text(_bytes(value, "contentEncoding"), "contentEncoding")
            if encoding:
                raise errors.UnsupportedMediaType(
                    f"protobuf bodies with a content encoding ({encoding}) are not supported")
        elif number == 4:
            content_type = _text(_bytes(value, "contentType"), "contentType")
            if content_type not in ("", MEDIA_TYPE):
                raise errors.UnsupportedMediaType(
                    f"the raw object in the protobuf body is {content_type}, not protobuf")
    return api_version, kind, raw


def decode(body: bytes, *, accepted: str) -> dict[str, Any]:
    """The object in a protobuf request body, as the JSON-shaped dict the server works on."""
    try:
        api_version, kind, raw = unknown_envelope(body)
        versions = KINDS.get(kind)
        if versions is None or (versions and api_version not in versions):
            raise errors.UnsupportedMediaType(
                f"the body of the request was in an unknown format - accepted media types "
                f"include: {accepted}")
        obj = decode_message(kind, raw, "")
    except Unreadable as e:
        raise errors.UnsupportedMediaType(f"{kind} {e}; it can be sent as application/json"
                                          ) from None
    except ValueError as e:
        raise errors.BadRequest(f"error decoding protobuf body: {e}") from None
    return {"apiVersion": api_version, "kind": kind, **obj}
