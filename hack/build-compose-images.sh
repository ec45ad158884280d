#!/usr/bin/env bash
# `make images`: every image docker-compose.yml needs, built here, for a machine that
# reaches no container registry (Debian's package mirror and PyPI are enough):
#   kubelite/python-base   Debian bookworm minbase + python3 (3.11) + python3-venv (and
#                          iptables, conntrack, dnsmasq, haproxy for the components),
#                          made with debootstrap and `docker import` (about 40 s)
#   kubelite/etcd:3.4      the host's etcd and etcdctl (Debian etcd-server/etcd-client 3.4)
#                          on that base
#   kubelite/kubelite:dev  the project's Dockerfile on that base, kubelite installed from a
#                          local wheelhouse (`pip wheel` here, `pip install --no-index` there)
#   kubelite/busybox:1.35, kubelite/pause:3.10   hack/build-images.sh (demo pods, sandbox)
# Then: ETCD_IMAGE=kubelite/etcd:3.4 PAUSE_IMAGE=kubelite/pause:3.10 docker compose up -d --wait
#
# Idempotent and quick when nothing changed: each image carries a hash of its inputs in
# the label io.kubelite.build and is rebuilt only when that hash changes.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
BASE_IMAGE="${BASE_IMAGE:-kubelite/python-base}"
ETCD_IMAGE="${ETCD_IMAGE:-kubelite/etcd:3.4}"
KUBELITE_IMAGE="${KUBELITE_IMAGE:-kubelite/kubelite:dev}"
DEBIAN_SUITE="${DEBIAN_SUITE:-bookworm}"
DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
PYTHON="${PYTHON:-$REPO/.venv/bin/python}"
WHEELHOUSE="$REPO/wheelhouse"
LOCK=/tmp/kubelite-build-compose-images.lock

say() { echo "build-compose-images: $*" >&2; }

need_root_package() {  # need_root_package COMMAND PACKAGE
  command -v "$1" >/dev/null 2>&1 && return 0
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    say "$1 is needed: apt-get install $2"
    exit 1
  fi
  say "installing $2"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends "$2" >/dev/null 2>&1 \
    || { apt-get update -qq && apt-get install -y -qq --no-install-recommends "$2" >/dev/null; }
}

build_label() {  # the io.kubelite.build label of an image, or nothing
  docker image inspect --format '{{ index .Config.Labels "io.kubelite.build" }}' "$1" \
    2>/dev/null || true
}

image_id() { docker image inspect --format '{{.Id}}' "$1"; }

docker_build() {  # quiet when it works, the whole output when it does not
  local out
  if ! out="$(docker build "$@" 2>&1)"; then
    echo "$out" >&2
    return 1
  fi
}

# The legacy builder when buildx is absent (Debian's docker.io has none): same Dockerfile.
if ! docker buildx version >/dev/null 2>&1; then
  export DOCKER_BUILDKIT=0
fi

build_python_base() {
  local hash root
  hash="$(printf 'minbase python3 python3-venv iptables conntrack dnsmasq-base haproxy %s %s v3' \
    "$DEBIAN_SUITE" "$DEBIAN_MIRROR" \
    | sha256sum | cut -c1-16)"
  if [ "$(build_label "$BASE_IMAGE")" = "$hash" ]; then
    return 0
  fi
  need_root_package debootstrap debootstrap
  root="$(mktemp -d /tmp/kubelite-rootfs.XXXXXX)"
  say "building $BASE_IMAGE: debootstrap $DEBIAN_SUITE (about a minute)"
  # iptables and conntrack: kube-proxy's proxier; dnsmasq-base: the cluster DNS server;
  # haproxy: the HA profile's load balancer
  debootstrap --variant=minbase \
    --include=python3,python3-venv,iptables,conntrack,dnsmasq-base,haproxy \
    "$DEBIAN_SUITE" "$root" "$DEBIAN_MIRROR" >"$root.log" 2>&1 \
    || { tail -n 20 "$root.log" >&2; rm -rf "$root" "$root.log"; exit 1; }
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root.log"
  tar -C "$root" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python3"]' \
    --change "LABEL io.kubelite.build=$hash" \
    - "$BASE_IMAGE" >/dev/null
  rm -rf "$root"
}

build_etcd() {
  local etcd etcdctl hash context
  need_root_package etcd etcd-server
  need_root_package etcdctl etcd-client
  etcd="$(command -v etcd)"
  etcdctl="$(command -v etcdctl)"
  hash="$(cat "$etcd" "$etcdctl" <(image_id "$BASE_IMAGE") | sha256sum | cut -c1-16)"
  if [ "$(build_label "$ETCD_IMAGE")" = "$hash" ]; then
    return 0
  fi
  say "building $ETCD_IMAGE from $etcd"
  context="$(mktemp -d)"
  cp "$etcd" "$etcdctl" "$context/"
  cat >"$context/Dockerfile" <<'EOF'
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
COPY etcd etcdctl /usr/local/bin/
CMD ["/usr/local/bin/etcd"]
EOF
  docker_build --build-arg "BASE_IMAGE=$BASE_IMAGE" --label "io.kubelite.build=$hash" \
    -t "$ETCD_IMAGE" "$context"
  rm -rf "$context"
}

kubelite_sources() {  # every file that ends up in the image, in a stable order
  (cd "$REPO" && find Dockerfile .dockerignore pyproject.toml README.md hack/*.py \
    apiserver scheduler kubelet common controller_manager -type f -not -path '*/__pycache__/*' 2>/dev/null \
    | LC_ALL=C sort)
}

build_kubelite() {
  local hash
  hash="$( (cd "$REPO" && kubelite_sources && kubelite_sources | xargs cat \
    && image_id "$BASE_IMAGE") | sha256sum | cut -c1-16)"
  if [ "$(build_label "$KUBELITE_IMAGE")" = "$hash" ]; then
    return 0
  fi
  say "building the wheelhouse ($WHEELHOUSE) with $PYTHON"
  mkdir -p "$WHEELHOUSE"
  rm -f "$WHEELHOUSE"/kubelite-*.whl
  "$PYTHON" -m pip wheel -q --wheel-dir "$WHEELHOUSE" "$REPO" >"$WHEELHOUSE/pip-wheel.log" 2>&1 \
    || { grep -v 'is ignored' "$WHEELHOUSE/pip-wheel.log" | tail -n 30 >&2; exit 1; }
  say "building $KUBELITE_IMAGE on $BASE_IMAGE"
  docker_build --build-arg "BASE_IMAGE=$BASE_IMAGE" --label "io.kubelite.build=$hash" \
    -t "$KUBELITE_IMAGE" "$REPO"
}

exec 9>"$LOCK"
flock 9

start=$SECONDS
bash "$REPO/hack/build-images.sh"
build_python_base
build_etcd
build_kubelite
say "images ready in $((SECONDS - start))s: $BASE_IMAGE $ETCD_IMAGE $KUBELITE_IMAGE" \
  "kubelite/busybox:1.35 kubelite/pause:3.10"
