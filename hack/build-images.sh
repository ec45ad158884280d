#!/usr/bin/env bash
# Builds the local images kubelite needs offline, when missing or out of date:
#   kubelite/busybox:1.35 (+ :latest)  busybox-static with every applet linked in /bin
#   kubelite/pause:3.10                the pod sandbox (a static `pause`, or busybox without gcc)
# Idempotent and fast when present: each image carries a hash of its inputs as a label.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
BUSYBOX_IMAGE="${BUSYBOX_IMAGE:-kubelite/busybox:1.35}"
PAUSE_IMAGE="${PAUSE_IMAGE:-kubelite/pause:3.10}"
LOCK=/tmp/kubelite-build-images.lock

find_busybox() {
  for b in /bin/busybox /usr/bin/busybox; do
    # a static busybox runs in an image with nothing else in it
    if [ -x "$b" ] && ! ldd "$b" >/dev/null 2>&1; then echo "$b"; return 0; fi
  done
  return 1
}

BUSYBOX="$(find_busybox || true)"
if [ -z "$BUSYBOX" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "build-images: installing busybox-static" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends busybox-static >/dev/null
    BUSYBOX="$(find_busybox)"
  else
    echo "build-images: a static busybox is needed: apt-get install busybox-static" >&2
    exit 1
  fi
fi

inputs_hash() {  # what an image is built from: this script, the busybox binary, pause.c
  cat "$0" "$BUSYBOX" "$HERE/images/pause/pause.c" "$@" 2>/dev/null | sha256sum | cut -c1-16
}
HASH="$(inputs_hash)"

image_is_current() {
  local label
  label="$(docker image inspect --format '{{ index .Config.Labels "io.kubelite.build" }}' \
    "$1" 2>/dev/null || true)"
  [ "$label" = "$HASH" ]
}

# A minimal root filesystem: busybox, its applets, /etc/passwd, /tmp.
make_rootfs() {
  local root="$1"
  mkdir -p "$root"/{bin,etc,tmp,root,proc,sys,dev,var/www}
  chmod 1777 "$root/tmp"
  cp "$BUSYBOX" "$root/bin/busybox"
  for applet in $("$BUSYBOX" --list); do
    [ "$applet" = busybox ] || ln -sf busybox "$root/bin/$applet"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' \
    >"$root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
}

import() {  # import DIR IMAGE CMD-JSON
  local dir="$1" image="$2" cmd="$3"
  tar -C "$dir" -c . | docker import \
    --change "CMD $cmd" \
    --change 'ENV PATH=/bin:/usr/bin:/sbin:/usr/sbin' \
    --change "LABEL io.kubelite.build=$HASH" \
    - "$image" >/dev/null
}

exec 9>"$LOCK"
flock 9

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

if image_is_current "$BUSYBOX_IMAGE"; then
  :
else
  echo "build-images: building $BUSYBOX_IMAGE" >&2
  make_rootfs "$work/busybox"
  import "$work/busybox" "$BUSYBOX_IMAGE" '["/bin/sh"]'
fi
docker tag "$BUSYBOX_IMAGE" "${BUSYBOX_IMAGE%:*}:latest"

if ! image_is_current "$PAUSE_IMAGE"; then
  echo "build-images: building $PAUSE_IMAGE" >&2
  mkdir -p "$work/pause"
  if command -v gcc >/dev/null 2>&1 \
      && gcc -static -Os -s -o "$work/pause/pause" "$HERE/images/pause/pause.c" 2>/dev/null; then
    import "$work/pause" "$PAUSE_IMAGE" '["/pause"]'
  else
    # No static toolchain: busybox's shell does the same job (exit on TERM/INT, else sleep).
    echo "build-images: no static gcc, the pause image uses busybox" >&2
    mkdir -p "$work/pause/bin"
    cp "$BUSYBOX" "$work/pause/bin/busybox"
    printf '#!/bin/busybox sh\ntrap "exit 0" TERM INT\nwhile :; do /bin/busybox sleep 3600 & wait $!; done\n' \
      >"$work/pause/pause"
    chmod +x "$work/pause/pause"
    import "$work/pause" "$PAUSE_IMAGE" '["/pause"]'
  fi
fi
