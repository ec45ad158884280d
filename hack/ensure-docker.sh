#!/usr/bin/env bash
# Makes sure a Docker daemon answers on the local socket; idempotent and quick when one does.
#   - installs docker.io with apt when dockerd is missing (Debian, as root)
#   - starts dockerd in the background, its log in $DOCKERD_LOG
#   - waits until the Engine API answers (`GET /_ping`)
# Used by `make test`, `make up`, CI and tests/docker_support.py. Safe to run concurrently:
# one caller starts the daemon, the others wait for it.
set -euo pipefail

SOCKET="${DOCKER_SOCKET:-/var/run/docker.sock}"
DOCKERD_LOG="${DOCKERD_LOG:-/var/log/kubelite-dockerd.log}"
TIMEOUT="${DOCKER_START_TIMEOUT:-60}"
LOCK=/tmp/kubelite-ensure-docker.lock

# GET /_ping on the unix socket (python3 is always here: the project is Python).
ping_daemon() {
  [ -S "$SOCKET" ] && python3 - "$SOCKET" <<'PY' >/dev/null 2>&1
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(2)
s.connect(sys.argv[1])
s.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
sys.exit(0 if s.recv(64).split(b" ")[1] == b"200" else 1)
PY
}

if ping_daemon; then
  exit 0
fi

exec 9>"$LOCK"
flock 9
if ping_daemon; then  # another caller started it while we waited for the lock
  exit 0
fi

if ! command -v dockerd >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    echo "ensure-docker: dockerd is not installed and we are not root: install docker.io" >&2
    exit 1
  fi
  echo "ensure-docker: installing docker.io" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends docker.io >/dev/null
fi
if [ "$(id -u)" != 0 ]; then
  echo "ensure-docker: no Docker daemon on $SOCKET and only root can start one" >&2
  exit 1
fi

if [ "$SOCKET" = /var/run/docker.sock ]; then
  host_arg=()
else
  host_arg=(--host "unix://$SOCKET")
fi
echo "ensure-docker: starting dockerd (log: $DOCKERD_LOG)" >&2
# setsid + nohup: the daemon outlives the caller (a test run, a make target).
setsid nohup dockerd "${host_arg[@]}" >>"$DOCKERD_LOG" 2>&1 </dev/null 9>&- &

deadline=$((SECONDS + TIMEOUT))
until ping_daemon; do
  if [ $SECONDS -ge $deadline ]; then
    echo "ensure-docker: dockerd did not answer on $SOCKET within ${TIMEOUT}s; last log lines:" >&2
    tail -n 30 "$DOCKERD_LOG" >&2 || true
    exit 1
  fi
  sleep 0.2
done
echo "ensure-docker: dockerd is up" >&2
