"""Kubernetes Status errors: one exception class per Status reason.

The apiserver raises these and renders them as `Status` objects; the API client
parses a `Status` answer back into the same classes (`error_from_status`). One tree
for both sides keeps the wording in one place.
"""

from __future__ import annotations

from typing import Any, ClassVar


class ApiError(Exception):
    """A Kubernetes `Status` with `status: Failure`."""

    code: ClassVar[int] = 500
    reason: ClassVar[str] = "InternalError"

    def __init__(
        self,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}
        # Details given, even empty, are sent: kube's generic errors carry `"details": {}`
        # and clients dereference it (kubectl debug reads details.name of a 404).
        self.has_details = details is not None
        self.headers = headers or {}
        # The Status's ListMeta: a 410 for an expired continue token carries a new token.
        self.list_meta: dict[str, Any] = {}

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": dict(self.list_meta),
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details or self.has_details:
            body["details"] = self.details
        body["code"] = self.code  # after details, in metav1.Status's order
        return body


class BadRequest(ApiError):
    code, reason = 400, "BadRequest"


class Unauthorized(ApiError):
    code, reason = 401, "Unauthorized"


class Forbidden(ApiError):
    code, reason = 403, "Forbidden"


class NotFound(ApiError):
    code, reason = 404, "NotFound"


class MethodNotAllowed(ApiError):
    code, reason = 405, "MethodNotAllowed"


class NotAcceptable(ApiError):
    code, reason = 406, "NotAcceptable"


class AlreadyExists(ApiError):
    code, reason = 409, "AlreadyExists"


class Conflict(ApiError):
    code, reason = 409, "Conflict"


class Gone(ApiError):
    """A watch or list from a resourceVersion that etcd has compacted away."""

    code, reason = 410, "Expired"


class RequestEntityTooLarge(ApiError):
    code, reason = 413, "RequestEntityTooLarge"


class UnsupportedMediaType(ApiError):
    code, reason = 415, "UnsupportedMediaType"


class Invalid(ApiError):
    code, reason = 422, "Invalid"


class TooManyRequests(ApiError):
    code, reason = 429, "TooManyRequests"


class InternalError(ApiError):
    code, reason = 500, "InternalError"


class ServiceUnavailable(ApiError):
    code, reason = 503, "ServiceUnavailable"


class Timeout(ApiError):
    code, reason = 504, "Timeout"


_BY_REASON: dict[str, type[ApiError]] = {
    cls.reason: cls
    for cls in (
        BadRequest, Unauthorized, Forbidden, NotFound, MethodNotAllowed, NotAcceptable,
        AlreadyExists, Conflict, Gone, RequestEntityTooLarge, UnsupportedMediaType,
        Invalid, TooManyRequests, InternalError, ServiceUnavailable, Timeout,
    )
}
_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound,
    405: MethodNotAllowed, 406: NotAcceptable, 409: Conflict, 410: Gone,
    413: RequestEntityTooLarge, 415: UnsupportedMediaType, 422: Invalid,
    429: TooManyRequests, 500: InternalError, 503: ServiceUnavailable, 504: Timeout,
}


def error_from_status(status: dict[str, Any], *, code: int | None = None) -> ApiError:
    """Rebuild the exception a `Status` body describes (reason first, then code)."""
    reason = str(status.get("reason") or "")
    status_code = int(status.get("code") or code or 500)
    cls = _BY_REASON.get(reason) or _BY_CODE.get(status_code, ApiError)
    if reason == "Gone":
        cls = Gone
    err = cls(str(status.get("message") or reason or f"HTTP {status_code}"),
              details=status.get("details") or {})
    return err


# What kube-apiserver says for a path it does not serve (go-restful's 404 and 405 through
# its ServiceErrorHandler, apierrors.NewGenericServerResponse): no name, no kind, and an
# empty details object that is still there.
GENERIC_MESSAGES: dict[int, str] = {
    400: "the server rejected our request for an unknown reason",
    401: "the server has asked for the client to provide credentials",
    404: "the server could not find the requested resource",
    405: "the server does not allow this method on the requested resource",
    406: "the server was unable to respond with a content type that the client supports",
    409: "the server reported a conflict",
    415: "the server was unable to respond with a content type that the client supports",
    422: "the server rejected our request due to an error in our request",
    429: "the server has received too many requests and has asked us to try again later",
    504: "the server was unable to return a response in the time allotted, but may still be "
         "processing the request",
}


def generic_server_response(code: int) -> ApiError:
    """NewGenericServerResponse(code, ...) with no resource: kube's answer to a request the
    router (not a resource's handler) refuses."""
    cls = _BY_CODE.get(code, ApiError)
    message = GENERIC_MESSAGES.get(
        code, f"the server responded with the status code {code} but did not return more "
              f"information")
    return cls(message, details={})


def path_not_found() -> NotFound:
    """404 for a path no resource is served at (an unknown resource or subresource)."""
    return NotFound(GENERIC_MESSAGES[404], details={})


def method_not_allowed() -> MethodNotAllowed:
    return MethodNotAllowed(GENERIC_MESSAGES[405], details={})


def not_found(resource: str, name: str) -> NotFound:
    return NotFound(f'{resource} "{name}" not found', details={"name": name, "kind": resource})


def already_exists(resource: str, name: str) -> AlreadyExists:
    return AlreadyExists(f'{resource} "{name}" already exists',
                         details={"name": name, "kind": resource})


def conflict(resource: str, name: str, why: str | None = None) -> Conflict:
    why = why or ("the object has been modified; please apply your changes to the latest "
                  "version and try again")
    return Conflict(f'Operation cannot be fulfilled on {resource} "{name}": {why}',
                    details={"name": name, "kind": resource})


def invalid(kind: str, name: str, causes: list[dict[str, str]], *, group: str = "") -> Invalid:
    """A 422 with one cause per problem, worded as kube-apiserver words it.

    Each cause is `{"reason": "FieldValueInvalid", "message": "...", "field": "..."}`;
    the top-level message joins `field: message` pairs the way
    `apimachinery/pkg/api/errors.NewInvalid` does.
    """
    parts = [f"{c['field']}: {c['message']}" if c.get("field") else c["message"] for c in causes]
    joined = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    return Invalid(f'{kind} "{name}" is invalid: {joined}',
                   details={"name": name, "group": group, "kind": kind, "causes": causes})


def too_old_resource_version(requested: int, oldest: int) -> Gone:
    return Gone(f"too old resource version: {requested} ({oldest})")
