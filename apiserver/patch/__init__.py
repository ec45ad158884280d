"""The three PATCH flavours kube-apiserver accepts, on plain JSON documents.

- `apply_merge_patch` (merge.py): RFC 7386 JSON merge patch (`application/merge-patch+json`).
- `apply_json_patch` (jsonpatch.py): RFC 6902 JSON patch (`application/json-patch+json`).
- `apply_strategic_merge_patch` (strategic.py): `application/strategic-merge-patch+json`,
  with each resource's patch merge keys.

Every function copies its inputs first and returns a new document.
"""

from apiserver.patch.common import UnknownError
from apiserver.patch.jsonpatch import apply_json_patch
from apiserver.patch.merge import apply_merge_patch
from apiserver.patch.strategic import apply_strategic_merge_patch

__all__ = ["UnknownError", "apply_json_patch", "apply_merge_patch", "apply_strategic_merge_patch"]
