"""The baseline the apiserver is measured against: a bare FastAPI endpoint writing to etcd.

    python bench/bare_endpoint.py --etcd-port 2379 --port 8090

POST /pods stores the request body under a key derived from its name, with aetcd, and
answers 201 with the body: no validation, no defaults, no transaction, no namespace check.
uvicorn runs it with the apiserver's settings (apiserver/__main__.py), so that the two
differ only in what the application does.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import aetcd
import uvicorn
from fastapi import FastAPI, Request, Response


def create_app(etcd_port: int) -> FastAPI:
    app = FastAPI()
    client = aetcd.Client(host="127.0.0.1", port=etcd_port)

    @app.post("/pods")
    async def create(request: Request) -> Response:
        body: dict[str, Any] = json.loads(await request.body())
        name = body["metadata"]["name"]
        await client.put(f"/bare/pods/{name}".encode(), json.dumps(body).encode())
        return Response(json.dumps(body), status_code=201, media_type="application/json")

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--etcd-port", type=int, default=2379)
    parser.add_argument("--port", type=int, default=8090)
    args = parser.parse_args()
    # the same uvicorn settings as apiserver/__main__.py (whose --log-level is info)
    uvicorn.run(create_app(args.etcd_port), host="127.0.0.1", port=args.port,
                log_level="info", access_log=False, timeout_graceful_shutdown=3,
                log_config=None, timeout_keep_alive=120)


if __name__ == "__main__":
    main()
