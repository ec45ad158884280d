"""What a request asks to do, read from its method and URL as kube's RequestInfoFactory
reads it (k8s.io/apiserver pkg/endpoints/request/requestinfo.go).

    GET    /api/v1/namespaces/default/pods          list pods in default
    GET    /api/v1/namespaces/default/pods?watch=1  watch
    GET    /api/v1/watch/namespaces/default/pods    watch (the old /watch/ prefix)
    DELETE /api/v1/namespaces/default/pods          deletecollection
    POST   /api/v1/namespaces/default/pods/web/binding   create pods/binding
    GET    /healthz                                 a non-resource "get" of /healthz
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import parse_qs

from apiserver.auth import Attributes, UserInfo
from apiserver.selectors import _split_term, _split_terms, unescape_field_value
from common.errors import ApiError

API_PREFIXES = ("api", "apis")
GROUPLESS_PREFIXES = ("api",)
SPECIAL_VERBS = ("proxy", "watch")
NAMESPACE_SUBRESOURCES = ("status", "finalize")
METHOD_VERBS = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update",
                "PATCH": "patch", "DELETE": "delete"}
TRUE = ("1", "t", "T", "TRUE", "true", "True")


def query_of(query_string: bytes | str) -> dict[str, str]:
    text = query_string.decode("latin-1") if isinstance(query_string, bytes) else query_string
    return {k: v[0] for k, v in parse_qs(text, keep_blank_values=True).items()}


def name_from_field_selector(text: str) -> str:
    """kube narrows a list or watch to one name when its field selector requires
    `metadata.name=NAME` exactly (so that a Role's resourceNames can allow it)."""
    names = set()
    for term in text.split(","):
        if "!=" in term:
            continue
        key, sep, value = term.partition("==") if "==" in term else term.partition("=")
        if sep and key.strip() == "metadata.name":
            names.add(value.strip())
    if len(names) == 1:
        name = names.pop()
        # path.IsValidPathSegmentName
        if name and name not in (".", "..") and "/" not in name and "%" not in name:
            return name
    return ""


SELECTOR_VERBS = ("list", "watch", "deletecollection")


def field_requirements(text: str) -> tuple[tuple[str, str, str], ...]:
    """fields.ParseSelector's requirements of `text` as (field, "=" or "!=", value), as
    kube's authorization attributes carry them (AuthorizeWithSelectors); () when it does
    not parse (kube's GetFieldSelector error: no selector to authorize with)."""
    requirements = []
    try:
        for term in _split_terms(text):
            if not term:
                continue
            split = _split_term(term)
            if split is None:
                return ()
            label, operator, raw = split
            requirements.append((label, "!=" if operator == "!=" else "=",
                                 unescape_field_value(raw)))
    except ApiError:
        return ()
    return tuple(requirements)


def request_attributes(user: UserInfo, method: str, path: str,
                       query: Mapping[str, str]) -> Attributes:
    """The Attributes of `method path?query` by `user`."""
    non_resource = Attributes(user=user, verb=method.lower(), resource_request=False, path=path)
    parts = [p for p in path.strip("/").split("/") if p]
    if len(parts) < 3 or parts[0] not in API_PREFIXES:
        return non_resource
    prefix, parts = parts[0], parts[1:]
    group = ""
    if prefix not in GROUPLESS_PREFIXES:
        if len(parts) < 3:
            return non_resource
        group, parts = parts[0], parts[1:]
    version, parts = parts[0], parts[1:]
    if parts[0] in SPECIAL_VERBS:
        if len(parts) < 2:
            # kube answers 500 here ("unable to determine kind and namespace"): nothing
            # to authorize as a resource, so it is a non-resource request
            return non_resource
        verb, parts = parts[0], parts[1:]
    else:
        verb = METHOD_VERBS.get(method.upper(), "")
    namespace = ""
    if parts[0] == "namespaces" and len(parts) > 1:
        namespace = parts[1]
        if len(parts) > 2 and parts[2] not in NAMESPACE_SUBRESOURCES:
            parts = parts[2:]
    resource = parts[0]
    name = parts[1] if len(parts) >= 2 else ""
    subresource = parts[2] if len(parts) >= 3 and verb != "proxy" else ""
    if not name and verb == "get":
        verb = "watch" if query.get("watch", "") in TRUE else "list"
        name = name_from_field_selector(query.get("fieldSelector", ""))
    if not name and verb == "delete":
        verb = "deletecollection"
    selector = (field_requirements(query.get("fieldSelector", ""))
                if verb in SELECTOR_VERBS else ())
    return Attributes(user=user, verb=verb, resource_request=True, api_group=group,
                      api_version=version, resource=resource, subresource=subresource,
                      namespace=namespace, name=name, path=path, field_selector=selector)

