"""Pod Security admission: each check as a pure function, the namespace labels, and the
apiserver process refusing (enforce) or warning (warn) as kube-apiserver does, seen over HTTP
and by the real kubectl."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from apiserver.auth import podsecurity as ps
from tests.support import ApiServer, Kubectl, unique

BUSYBOX = "kubelite/busybox:1.35"
ENFORCE = "pod-security.kubernetes.io/enforce"
WARN = "pod-security.kubernetes.io/warn"


def pod(*containers: dict[str, Any], name: str = "p", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"containers": list(containers) or [container("c")], **spec}}


def container(name: str, **security: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "image": BUSYBOX}
    if security:
        body["securityContext"] = security
    return body


RESTRICTED_OK = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                 "runAsNonRoot": True, "runAsUser": 1000,
                 "seccompProfile": {"type": "RuntimeDefault"}}


# --- the checks, one by one ----------------------------------------------------------------------

@pytest.mark.parametrize(("check", "bad", "reason", "detail"), [
    (ps.check_host_namespaces, pod(hostNetwork=True, hostPID=True, hostIPC=True),
     "host namespaces", "hostNetwork=true, hostPID=true, hostIPC=true"),
    (ps.check_privileged, pod(container("a", privileged=True), container("b", privileged=True)),
     "privileged", 'containers "a", "b" must not set securityContext.privileged=true'),
    (ps.check_capabilities_baseline,
     pod(container("d", capabilities={"add": ["SYS_PTRACE", "CHOWN", "NET_ADMIN"]})),
     "non-default capabilities",
     'container "d" must not include "NET_ADMIN", "SYS_PTRACE" in '
     "securityContext.capabilities.add"),
    (ps.check_host_path_volumes,
     pod(volumes=[{"name": "root", "hostPath": {"path": "/"}}, {"name": "e", "emptyDir": {}}]),
     "hostPath volumes", 'volume "root"'),
    (ps.check_host_ports,
     pod({"name": "w", "image": BUSYBOX, "ports": [{"containerPort": 80, "hostPort": 8080},
                                                   {"containerPort": 81, "hostPort": 443}]}),
     "hostPort", 'container "w" uses hostPorts 443, 8080'),
    (ps.check_proc_mount, pod(container("m", procMount="Unmasked")),
     "procMount", 'container "m" must not set securityContext.procMount to "Unmasked"'),
    (ps.check_seccomp_profile_baseline,
     pod(container("s", seccompProfile={"type": "Unconfined"}),
         securityContext={"seccompProfile": {"type": "Unconfined"}}),
     "seccompProfile",
     'pod and container "s" must not set securityContext.seccompProfile.type to "Unconfined"'),
    (ps.check_sysctls,
     pod(securityContext={"sysctls": [{"name": "kernel.msgmax", "value": "1"},
                                      {"name": "net.ipv4.tcp_syncookies", "value": "1"}]}),
     "forbidden sysctls", "kernel.msgmax"),
    (ps.check_selinux_options, pod(container("x", seLinuxOptions={"type": "spc_t"}),
                                   securityContext={"seLinuxOptions": {"user": "root"}}),
     "seLinuxOptions", 'pod and container "x" set forbidden securityContext.seLinuxOptions: '
                       'type "spc_t"; user may not be set'),
    (ps.check_app_armor_profile,
     {**pod(container("c", appArmorProfile={"type": "Unconfined"})), "metadata": {
         "name": "p", "annotations": {
             "container.apparmor.security.beta.kubernetes.io/a": "",
             "container.apparmor.security.beta.kubernetes.io/b": "runtime/default",
             "container.apparmor.security.beta.kubernetes.io/e": "unconfined"}}},
     "forbidden AppArmor profiles",
     'container "c" must not set AppArmor profile type to "Unconfined", '
     'container.apparmor.security.beta.kubernetes.io/e="unconfined"'),
    (ps.check_windows_host_process,
     pod(container("e", windowsOptions={"hostProcess": True}),
         container("f", windowsOptions={"hostProcess": True}),
         securityContext={"windowsOptions": {"hostProcess": True}}),
     "hostProcess",
     'pod and containers "e", "f" must not set securityContext.windowsOptions.hostProcess=true'),
    (ps.check_windows_host_process, pod(container("w", windowsOptions={"hostProcess": True})),
     "hostProcess", 'container "w" must not set securityContext.windowsOptions.hostProcess=true'),
    (ps.check_allow_privilege_escalation, pod(container("a"), container("b",
                                                                          allowPrivilegeEscalation=False)),
     "allowPrivilegeEscalation != false",
     'container "a" must set securityContext.allowPrivilegeEscalation=false'),
    (ps.check_capabilities_restricted,
     pod(container("a", capabilities={"add": ["NET_BIND_SERVICE", "SYS_ADMIN"]})),
     "unrestricted capabilities",
     'container "a" must set securityContext.capabilities.drop=["ALL"]; container "a" must '
     'not include "SYS_ADMIN" in securityContext.capabilities.add'),
    (ps.check_restricted_volumes,
     pod(volumes=[{"name": "h", "hostPath": {"path": "/"}}, {"name": "n", "nfs": {}},
                  {"name": "ok", "secret": {"secretName": "s"}}]),
     "restricted volume types", 'volumes "h", "n" use restricted volume types "hostPath", "nfs"'),
    (ps.check_run_as_non_root, pod(container("a"), container("b", runAsNonRoot=True)),
     "runAsNonRoot != true", 'pod or container "a" must set securityContext.runAsNonRoot=true'),
    (ps.check_run_as_non_root, pod(container("a", runAsNonRoot=False),
                                   securityContext={"runAsNonRoot": False}),
     "runAsNonRoot != true", 'pod and container "a" must not set securityContext.runAsNonRoot=false'),
    (ps.check_run_as_user, pod(container("r", runAsUser=0)),
     "runAsUser=0", 'container "r" must not set runAsUser=0'),
    (ps.check_seccomp_profile_restricted, pod(container("a")),
     "seccompProfile", 'pod or container "a" must set securityContext.seccompProfile.type to '
                       '"RuntimeDefault" or "Localhost"'),
    (ps.check_seccomp_profile_restricted, pod(container("a", seccompProfile={"type": "Unconfined"})),
     "seccompProfile",
     'container "a" must not set securityContext.seccompProfile.type to "Unconfined"'),
])
def test_a_check_refuses_in_kubes_words(check: ps.Check, bad: dict[str, Any], reason: str,
                                        detail: str) -> None:
    assert check(bad) == ps.Violation(reason, detail)


@pytest.mark.parametrize("check", [check for _, check in ps.BASELINE_CHECKS + ps.RESTRICTED_CHECKS])
def test_a_restricted_pod_passes_every_check(check: ps.Check) -> None:
    good = pod(container("c", **RESTRICTED_OK), volumes=[{"name": "e", "emptyDir": {}}],
               securityContext={"sysctls": [{"name": "net.ipv4.ping_group_range", "value": "0 1"}]})
    assert check(good) is None


def test_pod_level_settings_cover_every_container() -> None:
    good = pod(container("a"), container("b"), securityContext={
        "runAsNonRoot": True, "seccompProfile": {"type": "Localhost"}})
    assert ps.check_run_as_non_root(good) is None
    assert ps.check_seccomp_profile_restricted(good) is None


def test_ephemeral_and_init_containers_are_checked() -> None:
    spec_pod = pod(initContainers=[container("init", privileged=True)],
                   ephemeralContainers=[container("dbg", capabilities={"add": ["SYS_PTRACE"]})])
    assert ps.check_privileged(spec_pod) == ps.Violation(
        "privileged", 'container "init" must not set securityContext.privileged=true')
    assert ps.check_capabilities_baseline(spec_pod) == ps.Violation(
        "non-default capabilities",
        'container "dbg" must not include "SYS_PTRACE" in securityContext.capabilities.add')


def test_levels_order_their_violations_as_kube() -> None:
    bad = pod(container("c", privileged=True), hostNetwork=True)
    assert ps.violations_text(ps.evaluate(ps.BASELINE, bad)) == (
        "host namespaces (hostNetwork=true), privileged (container \"c\" must not set "
        "securityContext.privileged=true)")
    assert [v.reason for v in ps.evaluate(ps.RESTRICTED, bad)] == [
        "host namespaces", "privileged", "allowPrivilegeEscalation != false",
        "unrestricted capabilities", "runAsNonRoot != true", "seccompProfile"]
    assert ps.evaluate(ps.PRIVILEGED, bad) == []
    # at restricted the restricted capabilities check replaces the baseline one
    adds = pod(container("c", capabilities={"add": ["SYS_PTRACE"], "drop": ["ALL"]}))
    assert "non-default capabilities" not in [v.reason for v in ps.evaluate(ps.RESTRICTED, adds)]


# --- namespace labels ----------------------------------------------------------------------------

def test_defaults_baseline_except_kube_system() -> None:
    policy, causes = ps.policy_from_labels({}, "default")
    assert causes == [] and str(policy.enforce) == "baseline:latest"
    system, _ = ps.policy_from_labels({}, "kube-system")
    assert str(system.enforce) == "privileged:latest"


def test_labels_choose_levels_and_versions() -> None:
    policy, causes = ps.policy_from_labels({ENFORCE: "restricted", f"{ENFORCE}-version": "v1.30",
                                            "pod-security.kubernetes.io/audit": "baseline"}, "x")
    assert causes == []
    assert str(policy.enforce) == "restricted:v1.30"
    assert str(policy.warn) == "restricted:v1.30"  # warn follows an explicit enforce
    assert str(policy.audit) == "baseline:latest"
    only_warn, _ = ps.policy_from_labels({WARN: "restricted"}, "x")
    assert (str(only_warn.enforce), str(only_warn.warn)) == ("baseline:latest", "restricted:latest")


def test_bad_labels_are_invalid_and_enforced_as_restricted() -> None:
    policy, causes = ps.policy_from_labels({ENFORCE: "strict", f"{WARN}-version": "1.30"}, "x")
    assert policy.enforce.level == ps.RESTRICTED
    assert causes == [
        {"reason": "FieldValueInvalid", "field": f"metadata.labels[{ENFORCE}]",
         "message": 'Invalid value: "strict": must be one of privileged, baseline, restricted'},
        {"reason": "FieldValueInvalid", "field": f"metadata.labels[{WARN}-version]",
         "message": 'Invalid value: "1.30": must be "latest" or "v1.x"'}]


def test_decide_refuses_or_warns() -> None:
    enforce_baseline, _ = ps.policy_from_labels({WARN: "restricted"}, "x")
    decision = ps.decide(enforce_baseline, pod())
    assert decision.denied is None
    assert len(decision.warnings) == 1
    assert decision.warnings[0].startswith('would violate PodSecurity "restricted:latest": '
                                           "allowPrivilegeEscalation != false")
    refused = ps.decide(enforce_baseline, pod(container("c", privileged=True)))
    assert refused.warnings == ()  # no warnings on a request already refused
    assert refused.denied == ('violates PodSecurity "baseline:latest": privileged (container '
                              '"c" must not set securityContext.privileged=true)')


# --- through the apiserver -----------------------------------------------------------------------

@pytest.fixture
def kubectl(apiserver: ApiServer, tmp_path: Path) -> Kubectl:
    return Kubectl(apiserver, tmp_path / "kubectl")


@pytest.fixture
async def namespace(http: httpx.AsyncClient) -> AsyncIterator[str]:
    name = unique("podsec")
    created = await http.post("/api/v1/namespaces", json={"metadata": {"name": name}})
    assert created.status_code == 201, created.text
    yield name
    await http.delete(f"/api/v1/namespaces/{name}")


async def label(http: httpx.AsyncClient, namespace: str, labels: dict[str, str | None],
                ) -> httpx.Response:
    return await http.patch(f"/api/v1/namespaces/{namespace}",
                            json={"metadata": {"labels": labels}},
                            headers={"Content-Type": "application/merge-patch+json"})


def privileged_pod(name: str) -> dict[str, Any]:
    return pod(container("c", privileged=True), name=name, nodeName="nowhere", hostNetwork=True)


async def test_baseline_refuses_privileged_in_default_and_writes_nothing(
        http: httpx.AsyncClient) -> None:
    name = unique("priv")
    response = await http.post("/api/v1/namespaces/default/pods", json=privileged_pod(name))
    assert response.status_code == 403, response.text
    status = response.json()
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "Forbidden", 403)
    assert status["message"] == (
        f'pods "{name}" is forbidden: violates PodSecurity "baseline:latest": host namespaces '
        '(hostNetwork=true), privileged (container "c" must not set '
        "securityContext.privileged=true)")
    assert status["details"] == {"name": name, "kind": "pods"}
    assert (await http.get(f"/api/v1/namespaces/default/pods/{name}")).status_code == 404


async def test_kube_system_allows_it(http: httpx.AsyncClient) -> None:
    name = unique("priv")
    path = "/api/v1/namespaces/kube-system/pods"
    response = await http.post(path, json=privileged_pod(name))
    assert response.status_code == 201, response.text
    assert "warning" not in response.headers
    await http.delete(f"{path}/{name}", params={"gracePeriodSeconds": "0"})


async def test_privileged_label_allows_it(http: httpx.AsyncClient, namespace: str) -> None:
    assert (await label(http, namespace, {ENFORCE: "privileged"})).status_code == 200
    response = await http.post(f"/api/v1/namespaces/{namespace}/pods",
                               json=privileged_pod(unique("priv")))
    assert response.status_code == 201, response.text


async def test_restricted_refuses_a_pod_without_run_as_non_root(
        http: httpx.AsyncClient, namespace: str) -> None:
    assert (await label(http, namespace, {ENFORCE: "restricted"})).status_code == 200
    path = f"/api/v1/namespaces/{namespace}/pods"
    name = unique("plain")
    response = await http.post(path, json=pod(name=name))
    assert response.status_code == 403, response.text
    assert response.json()["message"] == (
        f'pods "{name}" is forbidden: violates PodSecurity "restricted:latest": '
        'allowPrivilegeEscalation != false (container "c" must set '
        "securityContext.allowPrivilegeEscalation=false), unrestricted capabilities "
        '(container "c" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != '
        'true (pod or container "c" must set securityContext.runAsNonRoot=true), seccompProfile '
        '(pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" '
        'or "Localhost")')
    assert (await http.get(f"{path}/{name}")).status_code == 404
    ok = await http.post(path, json=pod(container("c", **RESTRICTED_OK), name=unique("ok")))
    assert ok.status_code == 201, ok.text


async def test_warn_label_warns_and_creates(http: httpx.AsyncClient, namespace: str) -> None:
    assert (await label(http, namespace, {WARN: "restricted"})).status_code == 200
    path = f"/api/v1/namespaces/{namespace}/pods"
    name = unique("warned")
    response = await http.post(path, json=pod(name=name))
    assert response.status_code == 201, response.text
    warnings = response.headers.get_list("warning")
    assert len(warnings) == 1
    assert warnings[0].startswith('299 - "would violate PodSecurity \\"restricted:latest\\": '
                                  "allowPrivilegeEscalation != false")
    assert (await http.get(f"{path}/{name}")).status_code == 200


async def test_ephemeral_containers_are_checked(http: httpx.AsyncClient) -> None:
    name = unique("target")
    path = "/api/v1/namespaces/default/pods"
    assert (await http.post(path, json=pod(name=name, nodeName="nowhere"))).status_code == 201
    response = await http.patch(
        f"{path}/{name}/ephemeralcontainers",
        json={"spec": {"ephemeralContainers": [
            container("dbg", capabilities={"add": ["SYS_PTRACE"]})]}},
        headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert response.status_code == 403, response.text
    assert response.json()["message"] == (
        f'pods "{name}" is forbidden: violates PodSecurity "baseline:latest": non-default '
        'capabilities (container "dbg" must not include "SYS_PTRACE" in '
        "securityContext.capabilities.add)")
    got = (await http.get(f"{path}/{name}")).json()
    assert "ephemeralContainers" not in got["spec"]
    await http.delete(f"{path}/{name}", params={"gracePeriodSeconds": "0"})


async def test_status_updates_are_not_checked(http: httpx.AsyncClient) -> None:
    name = unique("status")
    path = "/api/v1/namespaces/kube-system/pods"
    assert (await http.post(path, json=privileged_pod(name))).status_code == 201
    # a pod admitted elsewhere (here: kube-system) keeps getting status updates
    response = await http.patch(f"{path}/{name}/status",
                                json={"status": {"message": "hello"}},
                                headers={"Content-Type": "application/merge-patch+json"})
    assert response.status_code == 200, response.text
    await http.delete(f"{path}/{name}", params={"gracePeriodSeconds": "0"})


async def test_bad_namespace_labels_are_invalid(http: httpx.AsyncClient, namespace: str) -> None:
    name = unique("badlabel")
    response = await http.post("/api/v1/namespaces", json={
        "metadata": {"name": name, "labels": {ENFORCE: "strict"}}})
    assert response.status_code == 422, response.text
    assert response.json()["message"] == (
        f'Namespace "{name}" is invalid: metadata.labels[{ENFORCE}]: Invalid value: "strict": '
        "must be one of privileged, baseline, restricted")
    assert (await http.get(f"/api/v1/namespaces/{name}")).status_code == 404
    response = await label(http, namespace, {f"{ENFORCE}-version": "next"})
    assert response.status_code == 422, response.text
    assert (await label(http, namespace, {f"{ENFORCE}-version": "v1.37"})).status_code == 200


def test_kubectl_shows_the_warning_and_the_refusal(kubectl: Kubectl, tmp_path: Path) -> None:
    namespace = unique("podsec-kubectl")
    kubectl("create", "namespace", namespace)
    try:
        kubectl("label", "namespace", namespace, f"{WARN}=restricted")
        warned = kubectl.run("-n", namespace, "run", unique("warned"), f"--image={BUSYBOX}",
                             "--overrides", '{"spec": {"nodeName": "nowhere"}}')
        assert 'Warning: would violate PodSecurity "restricted:latest": ' \
               "allowPrivilegeEscalation != false" in warned.stderr
        assert "created" in warned.stdout
        manifest = tmp_path / "priv.json"
        manifest.write_text(json.dumps(
            {"apiVersion": "v1", "kind": "Pod", **privileged_pod("privileged")}))
        refused = kubectl.run("-n", namespace, "create", "-f", str(manifest), check=False)
        assert refused.returncode != 0
        assert ('Error from server (Forbidden): error when creating "' in refused.stderr
                and 'pods "privileged" is forbidden: violates PodSecurity "baseline:latest": '
                    "host namespaces (hostNetwork=true), privileged" in refused.stderr)
    finally:
        kubectl.run("delete", "namespace", namespace, "--wait=false", check=False)


def test_existing_pods_are_summed_up_by_reasons() -> None:
    pods = [pod(name="a"), pod(name="b"), pod(name="c"),
            pod(container("c", **RESTRICTED_OK), name="fine"),
            pod(container("c", privileged=True), name="priv")]
    assert ps.existing_pod_warnings("ns", ps.LevelVersion(ps.RESTRICTED), pods) == [
        'existing pods in namespace "ns" violate the new PodSecurity enforce level '
        '"restricted:latest"',
        "a (and 2 other pods): allowPrivilegeEscalation != false, unrestricted capabilities, "
        "runAsNonRoot != true, seccompProfile",
        "priv: privileged, allowPrivilegeEscalation != false, unrestricted capabilities, "
        "runAsNonRoot != true, seccompProfile"]
    assert ps.existing_pod_warnings("ns", ps.LevelVersion(ps.BASELINE), pods[:4]) == []


async def test_tightening_enforce_warns_about_existing_pods(http: httpx.AsyncClient,
                                                            namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/pods"
    name = unique("running")
    assert (await http.post(path, json=pod(name=name, nodeName="nowhere"))).status_code == 201
    response = await label(http, namespace, {ENFORCE: "restricted"})
    assert response.status_code == 200, response.text
    assert response.headers.get_list("warning") == [
        f'299 - "existing pods in namespace \\"{namespace}\\" violate the new PodSecurity '
        'enforce level \\"restricted:latest\\""',
        f'299 - "{name}: allowPrivilegeEscalation != false, unrestricted capabilities, '
        'runAsNonRoot != true, seccompProfile"']
    assert (await http.get(f"{path}/{name}")).status_code == 200  # it keeps running
    again = await label(http, namespace, {"unrelated": "label"})
    assert again.headers.get_list("warning") == []
