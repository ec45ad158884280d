"""Label and field selectors, parsed and matched the way apimachinery does it.

`parse_label_selector` follows `k8s.io/apimachinery/pkg/labels/selector.go` (lexer, parser,
error wording, value validation); `parse_field_selector` follows
`k8s.io/apimachinery/pkg/fields/selector.go` plus the field-label conversion functions of
`pkg/apis/core/v1/conversion.go`; `selectable_fields` follows the `ToSelectableFields`
functions of `pkg/registry/core/*/strategy.go`. Each resource brings its own
`SelectableFields` table (apiserver/resources/*.py): the labels it accepts, their old
aliases, and the getter that reads them off an object; one table serves both the parser
and the watch cache, which computes an object's fields once per change
(`apiserver/cacher.py`, `is_selected`).

Both selectors are parsed once per request into precompiled requirement tests, because
they are matched against every object of every list and watch.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from apiserver.validation import is_label_value, is_qualified_name
from common.errors import BadRequest

if TYPE_CHECKING:
    from apiserver.resources import Resource

# ---------------------------------------------------------------------------------------------
# Label selectors
# ---------------------------------------------------------------------------------------------

# selection.Operator values, as apimachinery spells them.
IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS = "in", "notin", "=", "==", "!="
EXISTS, DOES_NOT_EXIST, GREATER_THAN, LESS_THAN = "exists", "!", "gt", "lt"
_BINARY_OPERATORS = (IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS, GREATER_THAN, LESS_THAN)

LabelTest = Callable[[Mapping[str, str]], bool]


@dataclass(frozen=True, slots=True)
class Requirement:
    """One `key op values` term; `values` are deduplicated and sorted, as apimachinery keeps them."""

    key: str
    operator: str
    values: tuple[str, ...] = ()
    test: LabelTest = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "test", _compile_requirement(self.key, self.operator, self.values))

    def __str__(self) -> str:
        if self.operator == DOES_NOT_EXIST:
            return "!" + self.key
        if self.operator == EXISTS:
            return self.key
        joined = ",".join(self.values)
        if self.operator in (IN, NOT_IN):
            return f"{self.key} {self.operator} ({joined})"
        symbol = {GREATER_THAN: ">", LESS_THAN: "<"}.get(self.operator, self.operator)
        return f"{self.key}{symbol}{joined}"


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """An AND of requirements; the empty selector matches everything."""

    requirements: tuple[Requirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        present: Mapping[str, str] = labels or {}
        for requirement in self.requirements:
            if not requirement.test(present):
                return False
        return True

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


def _compile_requirement(key: str, operator: str, values: tuple[str, ...]) -> LabelTest:
    if operator in (EQUALS, DOUBLE_EQUALS, IN):
        if len(values) == 1:
            only = values[0]
            return lambda labels: labels.get(key) == only
        allowed = frozenset(values)
        return lambda labels: key in labels and labels[key] in allowed
    if operator in (NOT_EQUALS, NOT_IN):
        denied = frozenset(values)
        return lambda labels: labels.get(key) not in denied if key in labels else True
    if operator == EXISTS:
        return lambda labels: key in labels
    if operator == DOES_NOT_EXIST:
        return lambda labels: key not in labels
    bound = _parse_go_int(values[0]) if len(values) == 1 else None
    if bound is None:
        return lambda labels: False
    if operator == GREATER_THAN:
        return lambda labels: _int_label(labels, key, lambda v: v > bound)
    return lambda labels: _int_label(labels, key, lambda v: v < bound)


def _int_label(labels: Mapping[str, str], key: str, compare: Callable[[int], bool]) -> bool:
    value = _parse_go_int(labels[key]) if key in labels else None
    return value is not None and compare(value)


_GO_INT = re.compile(r"[+-]?[0-9]+\Z")


def _parse_go_int(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64): no spaces, no underscores, int64 range."""
    if not _GO_INT.match(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


# --- lexer ---------------------------------------------------------------------------------

_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")
_LITERAL_TOKENS = {")", ",", "!", "==", "=", ">", "in", "<", "!=", "notin", "("}
_IDENTIFIER, _END, _ERROR = "identifier", "end", "error"


def _lex(text: str) -> list[tuple[str, str]]:
    """Tokens as (kind, literal); kind is the literal itself for operators and keywords."""
    tokens: list[tuple[str, str]] = []
    pos, size = 0, len(text)
    while True:
        while pos < size and text[pos] in _WHITESPACE:
            pos += 1
        if pos >= size:
            tokens.append((_END, ""))
            return tokens
        if text[pos] in _SPECIAL:
            token, pos = _scan_special(text, pos)
        else:
            start = pos
            while pos < size and text[pos] not in _SPECIAL and text[pos] not in _WHITESPACE:
                pos += 1
            word = text[start:pos]
            token = (word, word) if word in _LITERAL_TOKENS else (_IDENTIFIER, word)
        tokens.append(token)


def _scan_special(text: str, pos: int) -> tuple[tuple[str, str], int]:
    """The longest operator starting at pos ("!=" rather than "!", "==" rather than "=")."""
    best: str | None = None
    buffer = ""
    while pos < len(text) and text[pos] in _SPECIAL:
        candidate = buffer + text[pos]
        if candidate in _LITERAL_TOKENS:
            best, buffer, pos = candidate, candidate, pos + 1
        elif best is not None:
            break
        else:
            buffer, pos = candidate, pos + 1
    if best is None:
        return (_ERROR, f"error expected: keyword found '{buffer}'"), pos
    return (best, best), pos


# --- parser --------------------------------------------------------------------------------


class _SelectorSyntaxError(Exception):
    pass


class _LabelParser:
    """A port of apimachinery's recursive-descent label selector parser."""

    def __init__(self, text: str) -> None:
        self.tokens = _lex(text)
        self.position = 0

    def lookahead(self, values_context: bool = True) -> tuple[str, str]:
        return self._as_context(self.tokens[self.position], values_context)

    def consume(self, values_context: bool = True) -> tuple[str, str]:
        token = self.tokens[self.position]
        self.position += 1
        return self._as_context(token, values_context)

    @staticmethod
    def _as_context(token: tuple[str, str], values_context: bool) -> tuple[str, str]:
        # "in" and "notin" are identifiers wherever a value may stand ("x in (in)").
        if values_context and token[0] in (IN, NOT_IN):
            return _IDENTIFIER, token[1]
        return token

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            kind, literal = self.lookahead()
            if kind == _END:
                return requirements
            if kind not in (_IDENTIFIER, DOES_NOT_EXIST):
                raise _SelectorSyntaxError(
                    f"found '{literal}', expected: !, identifier, or 'end of string'")
            try:
                requirements.append(self.parse_requirement())
            except _SelectorSyntaxError as e:
                raise _SelectorSyntaxError(f"unable to parse requirement: {e}") from None
            kind, literal = self.consume()
            if kind == _END:
                return requirements
            if kind != ",":
                raise _SelectorSyntaxError(
                    f"found '{literal}', expected: ',' or 'end of string'")
            next_kind, next_literal = self.lookahead()
            if next_kind not in (_IDENTIFIER, DOES_NOT_EXIST):
                raise _SelectorSyntaxError(
                    f"found '{next_literal}', expected: identifier after ','")

    def parse_requirement(self) -> Requirement:
        key, operator = self.parse_key_and_infer_operator()
        if operator in (EXISTS, DOES_NOT_EXIST):
            return _new_requirement(key, operator, [])
        operator = self.parse_operator()
        values = self.parse_values() if operator in (IN, NOT_IN) else self.parse_exact_value()
        return _new_requirement(key, operator, sorted(values))

    def parse_key_and_infer_operator(self) -> tuple[str, str]:
        operator = ""
        kind, literal = self.consume()
        if kind == DOES_NOT_EXIST:
            operator = DOES_NOT_EXIST
            kind, literal = self.consume()
        if kind != _IDENTIFIER:
            raise _SelectorSyntaxError(f"found '{literal}', expected: identifier")
        problems = is_qualified_name(literal)
        if problems:
            raise _SelectorSyntaxError(_field_invalid("<nil>", literal, "; ".join(problems)))
        if self.lookahead()[0] in (_END, ",") and operator != DOES_NOT_EXIST:
            operator = EXISTS
        return literal, operator

    def parse_operator(self) -> str:
        kind, literal = self.consume(values_context=False)
        if kind in _BINARY_OPERATORS_BY_TOKEN:
            return _BINARY_OPERATORS_BY_TOKEN[kind]
        raise _SelectorSyntaxError(
            f"found '{literal}', expected: {', '.join(_BINARY_OPERATORS)}")

    def parse_values(self) -> set[str]:
        kind, literal = self.consume()
        if kind != "(":
            raise _SelectorSyntaxError(f"found '{literal}' expected: '('")
        kind, literal = self.lookahead()
        if kind in (_IDENTIFIER, ","):
            values = self.parse_identifiers_list()
            if self.consume()[0] != ")":
                raise _SelectorSyntaxError(f"found '{literal}', expected: ')'")
            return values
        if kind == ")":
            self.consume()
            return {""}
        raise _SelectorSyntaxError(f"found '{literal}', expected: ',', ')' or identifier")

    def parse_identifiers_list(self) -> set[str]:
        values: set[str] = set()
        while True:
            kind, literal = self.consume()
            if kind == _IDENTIFIER:
                values.add(literal)
                next_kind, next_literal = self.lookahead()
                if next_kind == ",":
                    continue
                if next_kind == ")":
                    return values
                raise _SelectorSyntaxError(f"found '{next_literal}', expected: ',' or ')'")
            if kind == ",":
                # "(,a", "a,,b" and "a,)" all select the empty value too.
                if not values:
                    values.add("")
                next_kind = self.lookahead()[0]
                if next_kind == ")":
                    values.add("")
                    return values
                if next_kind == ",":
                    values.add("")
                continue
            raise _SelectorSyntaxError(f"found '{literal}', expected: ',', or identifier")

    def parse_exact_value(self) -> set[str]:
        if self.lookahead()[0] in (_END, ","):
            return {""}
        kind, literal = self.consume()
        if kind == _IDENTIFIER:
            return {literal}
        raise _SelectorSyntaxError(f"found '{literal}', expected: identifier")


_BINARY_OPERATORS_BY_TOKEN = {
    IN: IN, NOT_IN: NOT_IN, "=": EQUALS, "==": DOUBLE_EQUALS, "!=": NOT_EQUALS,
    ">": GREATER_THAN, "<": LESS_THAN,
}


def _new_requirement(key: str, operator: str, values: list[str]) -> Requirement:
    """labels.NewRequirement: the value checks, aggregated the way field.ErrorList does."""
    problems: list[str] = []
    if operator in (GREATER_THAN, LESS_THAN):
        if len(values) != 1:
            problems.append(_field_invalid(
                "values", values, "for 'Gt', 'Lt' operators, exactly one value is required"))
        for index, value in enumerate(values):
            if _parse_go_int(value) is None:
                problems.append(_field_invalid(
                    f"values[{index}]", value,
                    "for 'Gt', 'Lt' operators, the value must be an integer"))
    for index, value in enumerate(values):
        value_problems = is_label_value(value)
        if value_problems:
            problems.append(_field_invalid(
                f"values[{index}][{key}]", value, "; ".join(value_problems)))
    if problems:
        unique = list(dict.fromkeys(problems))
        raise _SelectorSyntaxError(unique[0] if len(unique) == 1 else f"[{', '.join(unique)}]")
    return Requirement(key, operator, tuple(values))


def _field_invalid(path: str, value: str | list[str], detail: str) -> str:
    """field.Invalid(path, value, detail).Error()."""
    shown = _go_quote(value) if isinstance(value, str) else "[]string{" + ", ".join(
        _go_quote(v) for v in value) + "}"
    return f"{path}: Invalid value: {shown}: {detail}"


def _go_quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def parse_label_selector(text: str) -> LabelSelector:
    """labels.Parse; a syntax or validation error is a 400 worded as kube-apiserver words it."""
    try:
        requirements = _LabelParser(text).parse()
    except _SelectorSyntaxError as e:
        raise BadRequest(str(e)) from None
    requirements.sort(key=lambda r: r.key)
    return LabelSelector(tuple(requirements))


# ---------------------------------------------------------------------------------------------
# Field selectors
# ---------------------------------------------------------------------------------------------

# runtime.DefaultMetaV1FieldSelectorConversion, for resources without a table of their own.
_DEFAULT_FIELDS = frozenset({"metadata.name", "metadata.namespace"})


@dataclass(frozen=True, slots=True)
class SelectableFields:
    """A resource's field selector table (kube's AddFieldLabelConversionFunc plus
    ToSelectableFields): the labels it accepts, old names rewritten to them, and the
    values an object has for them (absent ones are "")."""

    labels: frozenset[str]
    get: Callable[[Mapping[str, Any]], dict[str, str]]
    aliases: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    field: str
    operator: str  # "=", "==" or "!="
    value: str

    def __str__(self) -> str:
        symbol = "!=" if self.operator == NOT_EQUALS else "="
        return f"{self.field}{symbol}{escape_field_value(self.value)}"


@dataclass(frozen=True, slots=True)
class FieldSelector:
    """An AND of `field=value` / `field!=value` terms over `selectable_fields`."""

    requirements: tuple[FieldRequirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, fields: Mapping[str, str]) -> bool:
        for requirement in self.requirements:
            equal = fields.get(requirement.field, "") == requirement.value
            if equal == (requirement.operator == NOT_EQUALS):
                return False
        return True

    def exact(self, field_name: str) -> str | None:
        """The value an `=`/`==` term requires of `field_name` (fields.RequiresExactMatch)."""
        for requirement in self.requirements:
            if requirement.field == field_name and requirement.operator != NOT_EQUALS:
                return requirement.value
        return None

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not backslash-escaped; escapes stay in the terms."""
    if not text:
        return []
    terms, start, escaped = [], 0, False
    for index, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            terms.append(text[start:index])
            start = index + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    """The first operator wins; "!=" and "==" are tried before "=" at each position."""
    for index in range(len(term)):
        for operator in (NOT_EQUALS, DOUBLE_EQUALS, EQUALS):
            if term.startswith(operator, index):
                return term[:index], operator, term[index + len(operator):]
    return None


def unescape_field_value(value: str) -> str:
    """fields.UnescapeValue: `\\\\`, `\\,` and `\\=` are the only escapes; bare `,`/`=` are errors."""
    if "\\" not in value and "," not in value and "=" not in value:
        return value
    out: list[str] = []
    escaped = False
    for char in value:
        if escaped:
            if char not in "\\,=":
                raise BadRequest(f"invalid field selector: invalid escape sequence: \\{char}")
            out.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in ",=":
            # Go prints the rune with %v, i.e. as its code point.
            raise BadRequest(f"invalid field selector: unescaped character in value: {ord(char)}")
        else:
            out.append(char)
    if escaped:
        raise BadRequest("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def escape_field_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _convert_field_label(resource: Resource, label: str) -> str:
    table = resource.fields
    if table is None:
        if label in _DEFAULT_FIELDS:
            return label
        raise BadRequest(f'"{label}" is not a known field selector: only '
                         '"metadata.name", "metadata.namespace"')
    label = table.aliases.get(label, label)
    if label not in table.labels:
        raise BadRequest(f"field label not supported: {label}")
    return label


def parse_field_selector(text: str, resource: Resource) -> FieldSelector:
    """fields.ParseSelector, then the resource's field label conversion; errors are 400s."""
    requirements = []
    for term in sorted(_split_terms(text)):
        if not term:
            continue
        split = _split_term(term)
        if split is None:
            raise BadRequest(f"invalid selector: '{text}'; can't understand '{term}'")
        label, operator, raw_value = split
        requirements.append((label, operator, unescape_field_value(raw_value)))
    return FieldSelector(tuple(
        FieldRequirement(_convert_field_label(resource, label), operator, value)
        for label, operator, value in requirements))


# --- what an object has for the field labels --------------------------------------------------


def field_text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def field_bool(value: Any) -> str:
    return "true" if value is True else "false"


def object_meta_fields(obj: Mapping[str, Any], namespaced: bool) -> dict[str, str]:
    meta = obj.get("metadata") or {}
    fields = {"metadata.name": field_text(meta.get("name"))}
    if namespaced:
        fields["metadata.namespace"] = field_text(meta.get("namespace"))
    return fields


def selectable_fields(resource: Resource, obj: dict[str, Any]) -> dict[str, str]:
    """The field set a field selector is matched against; absent values are ""."""
    if resource.fields is None:
        namespaced = bool((obj.get("metadata") or {}).get("namespace"))
        return object_meta_fields(obj, namespaced)
    return resource.fields.get(obj)
