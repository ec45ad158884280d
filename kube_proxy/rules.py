"""The iptables rules for Services, as kube-proxy's iptables proxier writes them
(pkg/proxy/iptables/proxier.go, syncProxyRules): pure functions from service ports and
their endpoints to chains of rules, and from two rule sets to `iptables-restore` input.

The shape, per table:

    nat     PREROUTING, OUTPUT -> KUBE-SERVICES: one rule per cluster IP (-> KUBE-SVC-*),
                                  external/load-balancer IP (-> KUBE-EXT-*), then, last,
                                  local destinations -> KUBE-NODEPORTS (-> KUBE-EXT-*)
            KUBE-EXT-*            masquerade (or the Local policy's source-preserving
                                  rules), then -> KUBE-SVC-* / KUBE-SVL-*
            KUBE-SVC-* / SVL-*    ClientIP affinity (-m recent), then one rule per
                                  endpoint, `-m statistic --probability 1/(n-i)`
            KUBE-SEP-*            hairpin masquerade, DNAT to the endpoint
            POSTROUTING -> KUBE-POSTROUTING: MASQUERADE what KUBE-MARK-MASQ marked
    filter  OUTPUT, FORWARD -> KUBE-SERVICES: REJECT cluster IPs without endpoints;
            INPUT, FORWARD -> KUBE-EXTERNAL-SERVICES: the same for node ports and
            external IPs; KUBE-FORWARD accepts marked traffic; KUBE-FIREWALL drops
            martian traffic to 127/8 (needed once route_localnet is on)

Every chain name starts with the instance's prefix ("KUBE" as kube's), so that several
proxies (clusters, nodes) share one host's iptables without touching each other's
chains; the hashed names are kube's (sha256 -> base32, 16 characters), so with the
default prefix they are exactly kube-proxy's.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kube_proxy.model import (
    Endpoint,
    ServicePort,
    ServicePortName,
    cluster_endpoints,
    local_endpoints,
)

DEFAULT_PREFIX = "KUBE"
MAX_CHAIN_LENGTH = 28  # iptables' limit (XT_EXTENSION_MAXNAMELEN - 1)
HASH_LENGTH = 16
# "<prefix>-SVC-<16>" must fit in 28 characters.
MAX_PREFIX_LENGTH = MAX_CHAIN_LENGTH - len("-SVC-") - HASH_LENGTH
# kube-proxy stops writing per-endpoint comments past this many endpoints in all
# (largeClusterMode): they double the size of iptables-restore's input.
LARGE_CLUSTER_ENDPOINTS = 1000

TABLES = ("filter", "nat")
BUILTIN_CHAINS = {"filter": ("INPUT", "FORWARD", "OUTPUT"),
                  "nat": ("PREROUTING", "INPUT", "OUTPUT", "POSTROUTING")}
HASHED_KINDS = ("SVC", "SVL", "EXT", "FW", "SEP")
FIXED_SUFFIXES = ("SERVICES", "EXTERNAL-SERVICES", "NODEPORTS", "POSTROUTING", "MARK-MASQ",
                  "FORWARD", "FIREWALL")

Chains = dict[str, list[str]]  # chain -> its rules, each without the leading "-A <chain>"
Tables = dict[str, Chains]  # table -> chains


def prefix_errors(prefix: str) -> list[str]:
    errors = []
    if not re.fullmatch(r"[A-Z0-9]+(-[A-Z0-9]+)*", prefix):
        errors.append(f"--iptables-chain-prefix {prefix!r}: upper-case letters, digits and "
                      f"inner dashes only")
    if len(prefix) > MAX_PREFIX_LENGTH:
        errors.append(f"--iptables-chain-prefix {prefix!r}: at most {MAX_PREFIX_LENGTH} "
                      f"characters (iptables chain names stop at {MAX_CHAIN_LENGTH})")
    return errors


def _hash(text: str) -> str:
    return base64.b32encode(hashlib.sha256(text.encode()).digest()).decode()[:HASH_LENGTH]


def port_proto_hash(name: ServicePortName) -> str:
    """kube's portProtoHash: of "ns/svc:port" + "tcp"."""
    return _hash(str(name) + name.protocol.lower())


def endpoint_hash(name: ServicePortName, endpoint: str) -> str:
    """kube's servicePortEndpointChainName hash: of "ns/svc:port" + "tcp" + "ip:port"."""
    return _hash(str(name) + name.protocol.lower() + endpoint)


@dataclass(frozen=True)
class Names:
    """The chain names one proxy instance owns."""

    prefix: str = DEFAULT_PREFIX

    @property
    def services(self) -> str:
        return f"{self.prefix}-SERVICES"

    @property
    def external_services(self) -> str:
        return f"{self.prefix}-EXTERNAL-SERVICES"

    @property
    def nodeports(self) -> str:
        return f"{self.prefix}-NODEPORTS"

    @property
    def postrouting(self) -> str:
        return f"{self.prefix}-POSTROUTING"

    @property
    def mark_masq(self) -> str:
        return f"{self.prefix}-MARK-MASQ"

    @property
    def forward(self) -> str:
        return f"{self.prefix}-FORWARD"

    @property
    def firewall(self) -> str:
        return f"{self.prefix}-FIREWALL"

    def service(self, name: ServicePortName) -> str:
        return f"{self.prefix}-SVC-{port_proto_hash(name)}"

    def service_local(self, name: ServicePortName) -> str:
        return f"{self.prefix}-SVL-{port_proto_hash(name)}"

    def external(self, name: ServicePortName) -> str:
        return f"{self.prefix}-EXT-{port_proto_hash(name)}"

    def endpoint(self, name: ServicePortName, endpoint: Endpoint) -> str:
        return f"{self.prefix}-SEP-{endpoint_hash(name, str(endpoint))}"

    def owns(self, chain: str) -> bool:
        """Whether a chain is this instance's: its fixed chains and its hashed ones, and
        nothing of an instance whose prefix merely starts with ours ("KUBE-T1-SVC-...")."""
        return bool(self._owned.fullmatch(chain))

    @property
    def _owned(self) -> re.Pattern[str]:
        fixed = "|".join(FIXED_SUFFIXES)
        hashed = "|".join(HASHED_KINDS)
        return re.compile(rf"{re.escape(self.prefix)}-(?:{fixed}|(?:{hashed})-[A-Z2-7]"
                          rf"{{{HASH_LENGTH}}})")

    def instance_comment(self, text: str) -> str:
        """A jump rule's comment: kube's words, naming the instance unless it is kube's."""
        return text if self.prefix == DEFAULT_PREFIX else f"{text} ({self.prefix})"


@dataclass(frozen=True)
class Config:
    names: Names = field(default_factory=Names)
    hostname: str = ""
    cluster_cidr: str = ""  # kube's --cluster-cidr: traffic from outside it is masqueraded
    masquerade_all: bool = False
    masquerade_bit: int = 14
    localhost_nodeports: bool = True  # node ports on 127.0.0.1 too (route_localnet)

    @property
    def mark(self) -> str:
        return hex(1 << self.masquerade_bit)


@dataclass(frozen=True)
class JumpRule:
    """A rule in a built-in chain jumping to one of ours (kube's iptablesJumpChains)."""

    table: str
    chain: str  # the built-in chain
    target: str
    comment: str
    extra: str = ""  # matches before the comment

    def spec(self) -> str:
        extra = f"{self.extra} " if self.extra else ""
        return f'{extra}-m comment --comment "{self.comment}" -j {self.target}'


def jump_rules(config: Config) -> list[JumpRule]:
    names = config.names
    new = "-m conntrack --ctstate NEW"
    external = names.instance_comment("kubernetes externally-visible service portals")
    portals = names.instance_comment("kubernetes service portals")
    jumps = [
        JumpRule("filter", "INPUT", names.external_services, external, new),
        JumpRule("filter", "FORWARD", names.external_services, external, new),
        JumpRule("filter", "FORWARD", names.services, portals, new),
        JumpRule("filter", "OUTPUT", names.services, portals, new),
        JumpRule("filter", "FORWARD", names.forward,
                 names.instance_comment("kubernetes forwarding rules")),
        JumpRule("nat", "OUTPUT", names.services, portals),
        JumpRule("nat", "PREROUTING", names.services, portals),
        JumpRule("nat", "POSTROUTING", names.postrouting,
                 names.instance_comment("kubernetes postrouting rules")),
    ]
    if config.localhost_nodeports:
        firewall = names.instance_comment("block incoming localnet connections")
        jumps += [JumpRule("filter", "INPUT", names.firewall, firewall),
                  JumpRule("filter", "OUTPUT", names.firewall, firewall)]
    return jumps


def probability(n: int) -> str:
    """kube's `%0.10f` of 1/n: the i-th of n endpoints matches with 1/(n-i)."""
    return f"{1.0 / n:0.10f}"


def _quoted(comment: str) -> str:
    return f'"{comment}"' if " " in comment else comment


@dataclass
class ServiceRules:
    """What one service port adds: rules in the shared chains, and chains of its own."""

    nat_services: list[str] = field(default_factory=list)
    nat_nodeports: list[str] = field(default_factory=list)
    filter_services: list[str] = field(default_factory=list)
    filter_external: list[str] = field(default_factory=list)
    nat_chains: Chains = field(default_factory=dict)


def _endpoint_rules(chain_of: Mapping[Endpoint, str], port: ServicePort,
                    endpoints: list[Endpoint], comments: bool) -> list[str]:
    """A policy chain (SVC/SVL): affinity lookups, then the random spread (kube's
    writeServiceToEndpointRules)."""
    rules: list[str] = []

    def comment(endpoint: Endpoint) -> str:
        return f'-m comment --comment "{port.name} -> {endpoint}" ' if comments else ""

    if port.session_affinity_seconds:
        for endpoint in endpoints:
            chain = chain_of[endpoint]
            rules.append(f"{comment(endpoint)}-m recent --name {chain} --rcheck --seconds "
                         f"{port.session_affinity_seconds} --reap -j {chain}")
    for i, endpoint in enumerate(endpoints):
        spread = (f"-m statistic --mode random --probability {probability(len(endpoints) - i)} "
                  if i < len(endpoints) - 1 else "")
        rules.append(f"{comment(endpoint)}{spread}-j {chain_of[endpoint]}")
    return rules


def service_rules(port: ServicePort, endpoints: Iterable[Endpoint], config: Config, *,
                  large_cluster: bool = False) -> ServiceRules:
    """The rules for one service port and its endpoints (the loop body of kube's
    syncProxyRules)."""
    names = config.names
    name = port.name
    spn = str(name)
    proto = f"-m {port.protocol} -p {port.protocol}"
    endpoints = list(endpoints)
    cluster = cluster_endpoints(endpoints) if (not port.internal_policy_local
                                               or port.externally_accessible) else []
    local = (local_endpoints(endpoints, config.hostname)
             if port.internal_policy_local or port.external_policy_local else [])
    reachable = {e: None for e in cluster + local}  # ordered union
    has_endpoints = bool(reachable)
    svc_chain, svl_chain = names.service(name), names.service_local(name)
    internal_chain = svl_chain if port.internal_policy_local else svc_chain
    has_internal = bool(local) if port.internal_policy_local else has_endpoints
    external_policy_chain = svl_chain if port.external_policy_local else svc_chain
    has_external = bool(local) if port.external_policy_local else has_endpoints
    ext_chain = names.external(name)
    uses_ext = has_endpoints and port.externally_accessible

    def filter_verdict() -> tuple[str, str]:
        if not has_endpoints:
            return f'"{spn} has no endpoints"', "REJECT"
        return f'"{spn} has no local endpoints"', "DROP"

    out = ServiceRules()
    cluster_ip = f"-m comment --comment \"{spn} cluster IP\" {proto} -d {port.cluster_ip} " \
                 f"--dport {port.port}"
    masquerade: list[str] = []
    if has_internal:
        if config.masquerade_all:
            masquerade.append(f"{cluster_ip} -j {names.mark_masq}")
        elif config.cluster_cidr:
            masquerade.append(f"{cluster_ip} ! -s {config.cluster_cidr} -j {names.mark_masq}")
        out.nat_services.append(f"{cluster_ip} -j {internal_chain}")
    else:
        comment, target = filter_verdict()
        out.filter_services.append(f"-m comment --comment {comment} {proto} "
                                   f"-d {port.cluster_ip} --dport {port.port} -j {target}")
    ext_comment, ext_target = filter_verdict()
    for kind, ips in (("external IP", port.external_ips),
                      ("loadbalancer IP", port.load_balancer_ips)):
        for ip in ips:
            if uses_ext:
                out.nat_services.append(f'-m comment --comment "{spn} {kind}" {proto} -d {ip} '
                                        f"--dport {port.port} -j {ext_chain}")
            if not has_external:
                out.filter_external.append(f"-m comment --comment {ext_comment} {proto} "
                                           f"-d {ip} --dport {port.port} -j {ext_target}")
    if port.node_port:
        if uses_ext:
            out.nat_nodeports.append(f"-m comment --comment {_quoted(spn)} {proto} "
                                     f"--dport {port.node_port} -j {ext_chain}")
        if not has_external:
            out.filter_external.append(f"-m comment --comment {ext_comment} -m addrtype "
                                       f"--dst-type LOCAL {proto} --dport {port.node_port} "
                                       f"-j {ext_target}")
    if uses_ext:
        ext: list[str] = []
        if not port.external_policy_local:
            ext.append(f'-m comment --comment "masquerade traffic for {spn} external '
                       f'destinations" -j {names.mark_masq}')
        else:
            if config.cluster_cidr:
                ext.append(f'-m comment --comment "pod traffic for {spn} external '
                           f'destinations" -s {config.cluster_cidr} -j {svc_chain}')
            ext.append(f'-m comment --comment "masquerade LOCAL traffic for {spn} external '
                       f'destinations" -m addrtype --src-type LOCAL -j {names.mark_masq}')
            ext.append(f'-m comment --comment "route LOCAL traffic for {spn} external '
                       f'destinations" -m addrtype --src-type LOCAL -j {svc_chain}')
        if has_external:
            ext.append(f"-j {external_policy_chain}")
        out.nat_chains[ext_chain] = ext
    chain_of = {e: names.endpoint(name, e) for e in reachable}
    comments = not large_cluster
    if cluster:
        rules = masquerade if internal_chain == svc_chain else []
        out.nat_chains[svc_chain] = rules + _endpoint_rules(chain_of, port, cluster, comments)
    if local:
        rules = masquerade if internal_chain == svl_chain else []
        out.nat_chains[svl_chain] = rules + _endpoint_rules(chain_of, port, local, comments)
    for endpoint in reachable:
        comment = f"-m comment --comment {_quoted(spn)} " if comments else ""
        affinity = (f"-m recent --name {chain_of[endpoint]} --set "
                    if port.session_affinity_seconds else "")
        out.nat_chains[chain_of[endpoint]] = [
            f"{comment}-s {endpoint.ip} -j {names.mark_masq}",
            f"{comment}{affinity}{proto} -j DNAT --to-destination {endpoint}"]
    return out


def is_large_cluster(endpoints: Mapping[ServicePortName, tuple[Endpoint, ...]]) -> bool:
    return sum(len(e) for e in endpoints.values()) > LARGE_CLUSTER_ENDPOINTS


class RuleCache:
    """Memoised `service_rules`, one entry per service port: an endpoint change
    recomputes only its own service's chains (the pure half of a partial sync)."""

    def __init__(self) -> None:
        self._entries: dict[ServicePortName, tuple[tuple[object, ...], ServiceRules]] = {}

    def rules(self, port: ServicePort, endpoints: tuple[Endpoint, ...], config: Config,
              large_cluster: bool) -> ServiceRules:
        key = (port, endpoints, config, large_cluster)
        found = self._entries.get(port.name)
        if found is not None and found[0] == key:
            return found[1]
        rules = service_rules(port, endpoints, config, large_cluster=large_cluster)
        self._entries[port.name] = (key, rules)
        return rules

    def retain(self, names: Iterable[ServicePortName]) -> None:
        keep = set(names)
        for name in [n for n in self._entries if n not in keep]:
            del self._entries[name]


def build_tables(ports: Iterable[ServicePort],
                 endpoints: Mapping[ServicePortName, tuple[Endpoint, ...]], config: Config,
                 cache: RuleCache | None = None) -> Tables:
    """Every chain this instance wants, with its rules, in kube's order."""
    names = config.names
    large = is_large_cluster(endpoints)
    nat: Chains = {names.services: [], names.nodeports: [], names.postrouting: [],
                   names.mark_masq: []}
    filter_: Chains = {names.services: [], names.external_services: [], names.forward: []}
    if config.localhost_nodeports:
        filter_[names.firewall] = []
    mark = config.mark
    nat[names.mark_masq].append(f"-j MARK --or-mark {mark}")
    nat[names.postrouting] += [
        f"-m mark ! --mark {mark}/{mark} -j RETURN",
        f"-j MARK --xor-mark {mark}",
        '-m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE']
    filter_[names.forward] += [
        "-m conntrack --ctstate INVALID -j DROP",
        f'-m comment --comment "kubernetes forwarding rules" -m mark --mark {mark}/{mark} '
        f"-j ACCEPT",
        '-m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate '
        'RELATED,ESTABLISHED -j ACCEPT']
    if config.localhost_nodeports:
        filter_[names.firewall].append(
            '-m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 '
            '! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP')
    service_chains: Chains = {}
    ordered = sorted(ports, key=lambda p: p.name)
    for port in ordered:
        eps = endpoints.get(port.name, ())
        rules = (cache.rules(port, eps, config, large) if cache is not None
                 else service_rules(port, eps, config, large_cluster=large))
        nat[names.services] += rules.nat_services
        nat[names.nodeports] += rules.nat_nodeports
        filter_[names.services] += rules.filter_services
        filter_[names.external_services] += rules.filter_external
        service_chains.update(rules.nat_chains)
    if cache is not None:
        cache.retain(p.name for p in ordered)
    nat[names.services].append(
        '-m comment --comment "kubernetes service nodeports; NOTE: this must be the last '
        f'rule in this chain" -m addrtype --dst-type LOCAL -j {names.nodeports}')
    nat.update(service_chains)
    return {"filter": filter_, "nat": nat}


# -- iptables-restore input ---------------------------------------------------------------------


@dataclass(frozen=True)
class Existing:
    """What iptables-save showed of ours: own chains, and the jump rules of built-in
    chains into them (each as iptables-save wrote it, "-A CHAIN ...")."""

    chains: Mapping[str, frozenset[str]] = field(default_factory=dict)  # table -> chains
    jumps: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # table -> rules


def _jump_is(saved: str, jump: JumpRule) -> bool:
    """Whether a saved built-in-chain rule is exactly this jump (iptables-save reorders
    matches, so compare what it keeps: chain, target, comment, ctstate)."""
    words = saved.split()
    if len(words) < 2 or words[1] != jump.chain or not saved.endswith(f"-j {jump.target}"):
        return False
    if f'--comment "{jump.comment}"' not in saved and f"--comment {jump.comment} " not in saved:
        return False
    return ("--ctstate NEW" in saved) == ("--ctstate NEW" in jump.extra)


def restore_text(desired: Tables, config: Config, *, applied: Tables | None = None,
                 existing: Existing | None = None) -> str:
    """`iptables-restore --noflush` input taking the host from what we know to `desired`.

    Full (`existing` given, read by iptables-save): every own chain is declared (which
    flushes it) and rewritten, own chains no longer wanted are deleted, and the jump
    rules from built-in chains are made exactly one each. Partial (`applied`, what the
    last sync wrote): only the chains whose rules changed are rewritten, and the chains
    gone are deleted; the rest is left alone, as kube's partial syncs do.
    """
    out: list[str] = []
    jumps = jump_rules(config)
    for table in TABLES:
        want = desired.get(table, {})
        if existing is not None:
            write = list(want)
            stale = sorted(c for c in existing.chains.get(table, frozenset()) if c not in want)
        else:
            before = (applied or {}).get(table, {})
            write = [c for c, rules in want.items() if before.get(c) != rules]
            stale = [c for c in before if c not in want]
        deletes: list[str] = []
        inserts: list[JumpRule] = []
        if existing is not None:
            # Exactly one of each wanted jump: a duplicate (say, from an older version)
            # or a jump nobody wants any more goes.
            wanted = [j for j in jumps if j.table == table]
            kept: set[JumpRule] = set()
            for saved in existing.jumps.get(table, ()):
                match = next((j for j in wanted if j not in kept and _jump_is(saved, j)), None)
                if match is None:
                    deletes.append("-D" + saved[2:])
                else:
                    kept.add(match)
            inserts = [j for j in wanted if j not in kept]
        if not write and not stale and not deletes and not inserts:
            continue
        out.append(f"*{table}")
        out += [f":{chain} - [0:0]" for chain in write + stale]
        out += deletes
        for chain in write:
            out += [f"-A {chain} {rule}" for rule in want[chain]]
        out += [f"-X {chain}" for chain in stale]
        # Each -I goes to the top, as kube's EnsureRule(Prepend) one after the other.
        out += [f"-I {j.chain} {j.spec()}" for j in inserts]
        out.append("COMMIT")
    return "\n".join(out) + "\n" if out else ""


def cleanup_text(existing: Existing) -> str:
    """iptables-restore input removing everything of ours: the jumps, then the chains."""
    out: list[str] = []
    for table in TABLES:
        chains = sorted(existing.chains.get(table, frozenset()))
        jumps = existing.jumps.get(table, ())
        if not chains and not jumps:
            continue
        out.append(f"*{table}")
        out += [f":{chain} - [0:0]" for chain in chains]
        out += ["-D" + s[2:] for s in jumps]
        out += [f"-X {chain}" for chain in chains]
        out.append("COMMIT")
    return "\n".join(out) + "\n" if out else ""


def parse_save(text: str, names: Names, table: str) -> tuple[frozenset[str], tuple[str, ...]]:
    """From `iptables-save -t TABLE`: our chains, and the built-in chains' rules jumping
    into them."""
    chains: set[str] = set()
    jumps: list[str] = []
    builtins = BUILTIN_CHAINS[table]
    for line in text.splitlines():
        if line.startswith(":"):
            chain = line[1:].split(" ", 1)[0]
            if names.owns(chain):
                chains.add(chain)
        elif line.startswith("-A "):
            words = line.split()
            if words[1] in builtins and "-j" in words:
                target = words[words.index("-j") + 1]
                if names.owns(target):
                    jumps.append(line)
    return frozenset(chains), tuple(jumps)


def count_rules(tables: Tables) -> dict[str, int]:
    return {table: sum(len(r) for r in chains.values()) for table, chains in tables.items()}
