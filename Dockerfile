# kubelite's components in one image: `python -m apiserver | scheduler | controller_manager
# | kubelet | kube_proxy | cluster_dns`.
#
# BASE_IMAGE is any image with Python >= 3.11 and its venv module: a slim Python image by
# default; on a machine without a registry, `make images` makes kubelite/python-base from
# Debian packages (debootstrap) and builds this file on it.
# kubelite comes from ./wheelhouse when it holds a kubelite wheel (`pip wheel .` on the
# host: `pip install --no-index`, nothing downloaded), else from this source tree and PyPI.
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PATH=/opt/kubelite/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# kube-proxy programs the host's iptables (nat and filter) and clears conntrack entries;
# the cluster DNS runs dnsmasq; the compose file's HA profile balances with haproxy. The
# Debian-made base has them already; a slim Python image gets them from its package mirror.
RUN if ! command -v iptables-restore >/dev/null || ! command -v conntrack >/dev/null \
        || ! [ -x /usr/sbin/dnsmasq ] || ! command -v haproxy >/dev/null; then \
        apt-get update \
     && apt-get install -y --no-install-recommends iptables conntrack dnsmasq-base haproxy \
     && rm -rf /var/lib/apt/lists/*; \
    fi

WORKDIR /opt/kubelite/src
COPY . .
RUN python3 -m venv /opt/kubelite \
 && if ls wheelhouse/kubelite-*.whl >/dev/null 2>&1; then \
        pip install --no-cache-dir --no-index --find-links wheelhouse kubelite; \
    else \
        pip install --no-cache-dir .; \
    fi \
 && python -c "import apiserver, scheduler, kubelet, common, controller_manager, kube_proxy, cluster_dns"

# The compose file picks the component; the kubelet runs under
# hack/kubelet_entrypoint.py, which removes its pods' containers when it is stopped.
CMD ["python", "-m", "apiserver", "--help"]
