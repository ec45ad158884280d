#!/usr/bin/env bash
# Installs the system packages kubelite needs when they are missing (Debian, as root).
set -euo pipefail
missing=()
command -v etcd >/dev/null 2>&1 || [ -x /usr/bin/etcd ] || missing+=(etcd-server)
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
[ -x /bin/busybox ] || [ -x /usr/bin/busybox ] || missing+=(busybox-static)
# etcd-client: etcdctl, whose snapshot save/restore/status `make backup` and `make restore` wrap
command -v etcdctl >/dev/null 2>&1 || missing+=(etcd-client)
command -v curl >/dev/null 2>&1 || missing+=(curl)
# jq: the README's curl examples (and tests/test_readme.py, which runs them) use it
command -v jq >/dev/null 2>&1 || missing+=(jq)
# wrk: the HTTP load of bench/bench_apiserver.py (a Python client saturates first)
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
# iptables (docker.io brings it too) and conntrack: kube-proxy's iptables proxier, which
# programs the nat table with iptables-restore and clears stale UDP flows as kube-proxy does
command -v iptables-restore >/dev/null 2>&1 || missing+=(iptables)
command -v conntrack >/dev/null 2>&1 || missing+=(conntrack)
# dnsmasq-base: the cluster DNS server (the binary alone, no system service), fed from the API
command -v dnsmasq >/dev/null 2>&1 || [ -x /usr/sbin/dnsmasq ] || missing+=(dnsmasq-base)
# chromium: the real browser tests/test_dashboard_browser.py drives through Playwright
[ -x /usr/bin/chromium ] || missing+=(chromium)
# haproxy: the load balancer in front of the apiservers of `hack/up.py --ha` (the binary only:
# the package's systemd service never runs here)
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
