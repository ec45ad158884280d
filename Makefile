# kubelite: `make up` runs a cluster in the foreground, `make test` proves it.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: help venv deps docker-ready test lint up down clean images

help:
	@echo "make up     - run etcd, apiserver, scheduler and two kubelets in the foreground"
	@echo "make test   - install what is missing and run the whole test suite"
	@echo "make lint   - ruff + mypy"

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

venv: $(VENV)/.installed

# System packages: etcd-server (etcd 3.4), docker.io (dockerd), busybox-static (demo image).
deps:
	@bash hack/install-deps.sh

# dockerd and the local images (busybox demo image, pod sandbox) for the kubelet tests.
docker-ready: deps
	@bash hack/ensure-docker.sh
	@bash hack/build-images.sh

test: venv deps docker-ready
	$(PY) -m pytest $(PYTEST_ARGS)

lint: venv
	$(VENV)/bin/ruff check apiserver scheduler kubelet common tests bench
	$(VENV)/bin/mypy apiserver scheduler kubelet common
