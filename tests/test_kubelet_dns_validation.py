"""The apiserver's dnsPolicy/dnsConfig rules (validatePodDNSConfig), with kube's messages;
and a real apiserver refusing a bad dnsConfig with 422 and writing nothing."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from apiserver.resources.pod_validation import validate_pod_dns_config, validate_pod_spec
from tests.support import unique


def spec(**fields: Any) -> dict[str, Any]:
    return {"containers": [{"name": "c", "image": "busybox", "imagePullPolicy": "Never",
                            "terminationMessagePolicy": "File"}],
            "restartPolicy": "Always", "dnsPolicy": "ClusterFirst", **fields}


def messages(config: dict[str, Any] | None, policy: str = "ClusterFirst") -> list[tuple[str, str]]:
    return [(c["field"], c["message"]) for c in
            validate_pod_dns_config(config, policy, "spec.dnsConfig")]


def test_none_needs_a_dns_config_with_a_nameserver():
    assert messages(None, "None") == [
        ("spec.dnsConfig", "Required value: must provide `dnsConfig` when `dnsPolicy` is None")]
    assert messages({"searches": ["a.example"]}, "None") == [
        ("spec.dnsConfig.nameservers",
         "Required value: must provide at least one DNS nameserver when `dnsPolicy` is None")]
    assert messages({"nameservers": ["1.2.3.4"]}, "None") == []


def test_a_valid_config_passes_with_any_policy():
    config = {"nameservers": ["1.2.3.4", "2001:db8::1"],
              "searches": ["ns1.svc.cluster.local", "my.example.", "_sip._tcp.example.com", "."],
              "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}]}
    for policy in ("ClusterFirst", "Default", "ClusterFirstWithHostNet", "None"):
        assert messages(config, policy) == []


def test_nameservers_at_most_three_and_all_ips():
    assert messages({"nameservers": ["1.1.1.1", "2.2.2.2", "3.3.3.3", "dns.example"]}) == [
        ("spec.dnsConfig.nameservers",
         'Invalid value: []string{"1.1.1.1", "2.2.2.2", "3.3.3.3", "dns.example"}: '
         "must not have more than 3 nameservers"),
        ("spec.dnsConfig.nameservers[3]",
         'Invalid value: "dns.example": must be a valid IP address, '
         "(e.g. 10.9.8.7 or 2001:db8::ffff)"),
    ]


def test_searches_are_counted_measured_and_each_a_subdomain():
    many = [f"d{i}.example" for i in range(33)]
    assert [f for f, _ in messages({"searches": many})] == ["spec.dnsConfig.searches"]
    assert "must not have more than 32 search paths" in messages({"searches": many})[0][1]
    at_limit = [f"{i:02d}" + "a" * 59 + ".x" for i in range(32)]  # 63 chars each
    at_limit[0] += "a"  # 32 x 63 + 1 + 31 spaces = 2048
    assert len(" ".join(at_limit)) == 2048
    assert messages({"searches": at_limit}) == []
    over = [*at_limit[:-1], at_limit[-1] + "b"]
    assert messages({"searches": over})[0][1].endswith(
        "must not have more than 2048 characters (including spaces) in the search list")
    [(field, message)] = messages({"searches": ["ok.example", "Bad_Domain"]})
    assert field == "spec.dnsConfig.searches[1]"
    assert message.startswith('Invalid value: "Bad_Domain": a lowercase RFC 1123 subdomain '
                              "must consist of lower case alphanumeric characters, '_', '-' "
                              "or '.', and must start and end with an alphanumeric character")


def test_options_need_a_name():
    assert messages({"options": [{"name": "ndots", "value": "1"}, {"value": "3"}]}) == [
        ("spec.dnsConfig.options[1]", "Required value: must not be empty")]


@pytest.mark.parametrize(("policy", "expected"), [
    ("", "Required value"),
    ("ClusterLast", 'Unsupported value: "ClusterLast": supported values: '
                    '"ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"'),
])
def test_dns_policy_must_be_one_of_kubes(policy: str, expected: str):
    causes = [c for c in validate_pod_spec(spec(dnsPolicy=policy), "spec")
              if c["field"] == "spec.dnsPolicy"]
    assert [c["message"] for c in causes] == [expected]


def test_pod_spec_validation_includes_the_dns_config():
    causes = validate_pod_spec(spec(dnsPolicy="None"), "spec")
    assert [c["field"] for c in causes] == ["spec.dnsConfig"]


async def test_the_apiserver_refuses_a_bad_dns_config_and_writes_nothing(
        http: httpx.AsyncClient) -> None:
    name = unique("dns-bad")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"containers": [{"name": "c", "image": "busybox"}], "dnsPolicy": "None",
                    "dnsConfig": {"nameservers": ["not-an-ip"]}}}
    response = await http.post("/api/v1/namespaces/default/pods", json=pod)
    assert response.status_code == 422, response.text
    status = response.json()
    assert status["reason"] == "Invalid"
    assert [c["field"] for c in status["details"]["causes"]] == ["spec.dnsConfig.nameservers[0]"]
    gone = await http.get(f"/api/v1/namespaces/default/pods/{name}")
    assert gone.status_code == 404
