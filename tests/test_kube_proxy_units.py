"""kube-proxy's pure pieces besides the rules: the sync schedule (kube's
BoundedFrequencyRunner), the flags, and what it reads from Services."""

from __future__ import annotations

import pytest

from kube_proxy.__main__ import config_of, parse_args
from kube_proxy.model import (
    LAST_CHANGE_TRIGGER_TIME,
    Endpoint,
    service_ports,
    should_skip_service,
    trigger_time,
)
from kube_proxy.proxier import Schedule
from kube_proxy.rules import Config, Names, build_tables

SCHEDULE = Schedule(min_sync_period=1.0, sync_period=30.0)


@pytest.mark.parametrize(("now", "last", "dirty", "delay"), [
    (10.0, 9.5, True, 0.5),  # a change within min-sync-period waits for the rest of it
    (10.0, 5.0, True, 0.0),  # a change after it syncs at once
    (10.0, 9.5, False, 29.5),  # nothing changed: the periodic sync
    (40.0, 9.5, False, 0.0),
])
def test_schedule(now: float, last: float, dirty: bool, delay: float) -> None:
    assert SCHEDULE.delay(now=now, last_sync=last, dirty=dirty) == pytest.approx(delay)


def test_flags_build_the_config() -> None:
    args = parse_args(["--master", "http://127.0.0.1:8080", "--hostname-override", "node1",
                       "--iptables-chain-prefix", "KT1", "--cluster-cidr", "172.17.0.0/16",
                       "--iptables-min-sync-period", "500ms", "--iptables-sync-period", "1m",
                       "--iptables-masquerade-bit", "15",
                       "--healthz-bind-address", "127.0.0.1:0"])
    config = config_of(args)
    assert config == Config(names=Names("KT1"), hostname="node1",
                            cluster_cidr="172.17.0.0/16", masquerade_bit=15)
    assert config.mark == "0x8000"
    assert args.iptables_min_sync_period == 0.5 and args.iptables_sync_period == 60
    assert (args.bind_address, args.port) == ("127.0.0.1", 0)


@pytest.mark.parametrize("argv", [
    ["--iptables-chain-prefix", "MUCHTOOLONG"],
    ["--iptables-chain-prefix", "lower"],
    ["--cluster-cidr", "not-a-cidr"],
    ["--iptables-masquerade-bit", "32"],
    ["--master", "http://a", "--apiserver", "http://b"],
    ["--healthz-bind-address", "10256"],
    ["--healthz-bind-address", "localhost:10256"],
    ["--proxy-mode", "ipvs"],
])
def test_bad_flags_are_refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_args(argv)
    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_skipped_services() -> None:
    assert should_skip_service({"spec": {"clusterIP": "None"}}) is not None
    assert should_skip_service({"spec": {"type": "ExternalName"}}) is not None
    assert should_skip_service({"spec": {"clusterIP": "fd00::1"}}) is not None
    assert should_skip_service({"spec": {"clusterIP": "10.96.0.1"}}) is None


def test_external_and_load_balancer_ips_go_through_the_external_chain() -> None:
    svc = {"metadata": {"namespace": "ns4", "name": "svc4"},
           "spec": {"type": "LoadBalancer", "clusterIP": "172.30.0.44",
                    "externalIPs": ["192.168.99.33"],
                    "ports": [{"name": "p80", "port": 80, "protocol": "TCP",
                               "nodePort": 3004}]},
           "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}}
    ports = service_ports(svc)
    assert ports[0].node_port == 3004 and ports[0].load_balancer_ips == ("1.2.3.4",)
    nat = build_tables(ports, {}, Config())
    # No endpoints: every entrance is rejected in the filter table.
    external = nat["filter"]["KUBE-EXTERNAL-SERVICES"]
    assert external == [
        '-m comment --comment "ns4/svc4:p80 has no endpoints" -m tcp -p tcp -d 192.168.99.33 '
        "--dport 80 -j REJECT",
        '-m comment --comment "ns4/svc4:p80 has no endpoints" -m tcp -p tcp -d 1.2.3.4 '
        "--dport 80 -j REJECT",
        '-m comment --comment "ns4/svc4:p80 has no endpoints" -m addrtype --dst-type LOCAL '
        "-m tcp -p tcp --dport 3004 -j REJECT"]
    tables = build_tables(ports, {ports[0].name: (Endpoint("10.180.0.4", 80),)}, Config())
    services = tables["nat"]["KUBE-SERVICES"]
    assert ('-m comment --comment "ns4/svc4:p80 external IP" -m tcp -p tcp -d 192.168.99.33 '
            "--dport 80 -j KUBE-EXT-4SW47YFZTEDKD3PK") in services
    assert ('-m comment --comment "ns4/svc4:p80 loadbalancer IP" -m tcp -p tcp -d 1.2.3.4 '
            "--dport 80 -j KUBE-EXT-4SW47YFZTEDKD3PK") in services
    assert tables["filter"]["KUBE-EXTERNAL-SERVICES"] == []


@pytest.mark.parametrize(("annotation", "expected"), [
    ("2026-01-01T00:00:01.5Z", 1767225601.5),
    ("2026-01-01T00:00:01Z", 1767225601.0),
    ("yesterday", None),
    (None, None),
])
def test_trigger_time_of_a_slice(annotation: str | None, expected: float | None) -> None:
    annotations = {} if annotation is None else {LAST_CHANGE_TRIGGER_TIME: annotation}
    assert trigger_time({"metadata": {"annotations": annotations}}) == expected
