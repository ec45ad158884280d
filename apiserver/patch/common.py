"""What the three patch flavours share: JSON values copied and described as Go describes them,
and the errors kube-apiserver answers with."""

from __future__ import annotations

from typing import Any

from common.errors import BadRequest, Invalid

JSON = Any


class UnknownError(BadRequest):
    """A patch kube's merge code refuses with a plain error. kube-apiserver answers those
    500 with no reason, blaming itself; the patch is at fault, so this is a 400 with
    kube's message."""



def copy_json(value: JSON) -> JSON:
    """A deep copy of a JSON value, much cheaper than copy.deepcopy."""
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) for v in value]
    return value



def rejected(cause: str) -> Invalid:
    """errors.NewGenericServerResponse(422, ...): the generic message, the reason in a cause."""
    return Invalid("the server rejected our request due to an error in our request",
                   details={"causes": [{"reason": "UnexpectedServerResponse", "message": cause}]})



def json_kind(value: JSON) -> str:
    """The JSON type name encoding/json puts in "cannot unmarshal X into ..." messages."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    names: dict[type, str] = {dict: "object", list: "array", str: "string"}
    return names.get(type(value), "null")

