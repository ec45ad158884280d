"""The 403 Status of a denied request, worded as kube-apiserver's responsewriters do."""

from __future__ import annotations

from apiserver.auth import Attributes
from common import errors


def qualified_resource(attributes: Attributes) -> str:
    """`pods`, `leases.coordination.k8s.io`: schema.GroupResource's String()."""
    if attributes.api_group:
        return f"{attributes.resource}.{attributes.api_group}"
    return attributes.resource


def forbidden_message(attributes: Attributes) -> str:
    """responsewriters' forbiddenMessage."""
    user = attributes.user.name
    if not attributes.resource_request:
        return f'User "{user}" cannot {attributes.verb} path "{attributes.path}"'
    resource = attributes.resource
    if attributes.subresource:
        resource = f"{resource}/{attributes.subresource}"
    where = (f'in the namespace "{attributes.namespace}"' if attributes.namespace
             else "at the cluster scope")
    return (f'User "{user}" cannot {attributes.verb} resource "{resource}" in API group '
            f'"{attributes.api_group}" {where}')


def forbidden(attributes: Attributes, reason: str) -> errors.Forbidden:
    """responsewriters.ForbiddenStatusError: apierrors.NewForbidden of the request's
    group/resource and name."""
    message = forbidden_message(attributes)
    if reason:
        message = f"{message}: {reason}"
    resource = qualified_resource(attributes) if attributes.resource_request else ""
    if not resource:
        full = f"forbidden: {message}"
    elif attributes.name:
        full = f'{resource} "{attributes.name}" is forbidden: {message}'
    else:
        full = f"{resource} is forbidden: {message}"
    details = {"name": attributes.name, "group": attributes.api_group,
               "kind": attributes.resource if attributes.resource_request else ""}
    return errors.Forbidden(full, details={k: v for k, v in details.items() if v})
