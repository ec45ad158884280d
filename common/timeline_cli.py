"""`kubectl timeline pod/NAME [-n NAMESPACE] [-o text|mermaid|svg|json]`: a kubectl plugin.

kubectl runs any `kubectl-timeline` on PATH for `kubectl timeline`, passing the rest of
the command line. This reads the pod and its Events through the API with the user's
kubeconfig (`--kubeconfig`, else the first file of $KUBECONFIG, else ~/.kube/config;
`--context`; its CA, client certificate or token, as kubectl uses them) and draws the
pod's timeline (common/timeline.py) with a renderer of common/timeline_render.py.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import httpx
import yaml

from common import timeline, timeline_render
from common.client import ApiClient
from common.errors import ApiError
from common.kubeconfig import KubeconfigError, load

POD_KINDS = ("pod", "pods", "po")


def parse_target(target: str) -> str:
    """`pod/NAME`, `pods/NAME`, `po/NAME` or `NAME` → NAME."""
    kind, slash, name = target.partition("/")
    if not slash:
        return target
    if kind.lower() not in POD_KINDS:
        raise ValueError(f'only pods have a timeline, not "{kind}"')
    if not name:
        raise ValueError(f'"{target}" names no pod')
    return name


def kubeconfig_path(flag: str | None, environ: dict[str, str] | os._Environ[str]) -> Path:
    if flag:
        return Path(flag)
    for entry in (environ.get("KUBECONFIG") or "").split(os.pathsep):
        if entry and Path(entry).exists():
            return Path(entry)
    return Path.home() / ".kube" / "config"


def context_namespace(path: Path, context: str | None) -> str:
    """The namespace the kubeconfig's context names, as kubectl defaults to it."""
    try:
        config = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return "default"
    name = context or config.get("current-context")
    for entry in config.get("contexts") or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            return str((entry.get("context") or {}).get("namespace") or "default")
    return "default"


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="kubectl timeline",
        description="Draw a pod's measured flow (client → apiserver → etcd → scheduler → "
                    "kubelet → docker) as a sequence diagram.")
    parser.add_argument("target", help="pod/NAME (or NAME)")
    parser.add_argument("-n", "--namespace", help="the pod's namespace")
    parser.add_argument("-o", "--output", choices=sorted(timeline_render.RENDERERS),
                        default="text")
    parser.add_argument("--kubeconfig", help="the kubeconfig file (default: $KUBECONFIG)")
    parser.add_argument("--context", help="the kubeconfig context to use")
    parser.add_argument("--request-timeout", type=float, default=30.0, metavar="SECONDS")
    return parser.parse_args(argv)


async def fetch(client: ApiClient, namespace: str, name: str
                ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    pod = await client.get("pods", name, namespace=namespace)
    uid = (pod.get("metadata") or {}).get("uid") or ""
    # What `kubectl describe pod` asks for.
    selector = (f"involvedObject.name={name},involvedObject.namespace={namespace},"
                f"involvedObject.uid={uid}")
    events = await client.list("events", namespace=namespace, field_selector=selector)
    return pod, list(events.get("items") or [])


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    try:
        name = parse_target(args.target)
        path = kubeconfig_path(args.kubeconfig, os.environ)
        connection = load(path, context=args.context)
    except (ValueError, KubeconfigError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    namespace = args.namespace or context_namespace(path, args.context)

    async def run() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        async with ApiClient(connection, timeout=args.request_timeout,
                             user_agent="kubectl-timeline") as client:
            return await fetch(client, namespace, name)

    try:
        pod, events = asyncio.run(run())
    except ApiError as e:
        print(f"Error from server ({e.reason}): {e.message}", file=sys.stderr)
        return 1
    except (OSError, httpx.HTTPError) as e:
        print(f"error: cannot reach {connection.server}: {e}", file=sys.stderr)
        return 1
    drawn = timeline_render.RENDERERS[args.output](timeline.build(pod, events))
    sys.stdout.write(drawn)
    return 0


if __name__ == "__main__":
    sys.exit(main())
