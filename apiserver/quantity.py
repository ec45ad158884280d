"""Resource quantities (`100m`, `1Gi`, `1e3`, `0.5`), as apimachinery's resource.Quantity reads them.

Grammar (k8s.io/apimachinery/pkg/api/resource/quantity.go):

    <quantity>        ::= <signedNumber><suffix>
    <signedNumber>    ::= <number> | <sign><number>
    <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
    <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

SPLIT_RE = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"

# The error texts of resource.ErrFormatWrong, ErrNumeric and ErrSuffix.
FORMAT_WRONG = f"quantities must match the regular expression '{SPLIT_RE}'"
NUMERIC_WRONG = "unable to parse numeric part of quantity"
SUFFIX_WRONG = "unable to parse quantity's suffix"

# The shape parseQuantityString accepts: a number, then suffix letters, then an optional
# signed exponent. Which suffixes mean something is decided afterwards.
_SCAN = re.compile(r"([+-]?)([0-9]*(?:\.[0-9]*)?)([eEinumkKMGTP]*[-+]?[0-9]*)")
_EXPONENT = re.compile(r"[eE][-+]?[0-9]+")

_BINARY_SI = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_SI = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15,
               "E": 18}


class QuantityError(ValueError):
    """A string that is not a quantity; str() is apimachinery's wording."""


def parse_quantity(text: str) -> Decimal:
    """The exact value of a quantity, or QuantityError worded like resource.ParseQuantity."""
    if not text:
        raise QuantityError(FORMAT_WRONG)
    match = _SCAN.fullmatch(text)
    if match is None:
        raise QuantityError(FORMAT_WRONG)
    sign, number, suffix = match.groups()
    multiplier = suffix_multiplier(suffix)
    if multiplier is None:
        raise QuantityError(SUFFIX_WRONG)
    try:
        value = Decimal(number)
    except InvalidOperation:
        raise QuantityError(NUMERIC_WRONG) from None
    value *= multiplier
    return -value if sign == "-" else value


def suffix_multiplier(suffix: str) -> Decimal | None:
    """What a suffix multiplies the number by, or None when it is not a known suffix."""
    if suffix in _BINARY_SI:
        return Decimal(2) ** _BINARY_SI[suffix]
    if suffix in _DECIMAL_SI:
        return Decimal(10) ** _DECIMAL_SI[suffix]
    if _EXPONENT.fullmatch(suffix):
        return Decimal(10) ** int(suffix[1:])
    return None


def quantity_string(value: object) -> str:
    """The string form of a quantity given as a JSON string or number; QuantityError if invalid.

    Quantities arrive as strings (`"100m"`) or JSON numbers (`1`, `0.5`), like
    resource.Quantity.UnmarshalJSON accepts them.
    """
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise QuantityError(FORMAT_WRONG)
    text = value if isinstance(value, str) else number_text(value)
    parse_quantity(text)
    return text


def number_text(number: int | float) -> str:
    if isinstance(number, int):
        return str(number)
    exact = Decimal(repr(number))
    return format(exact.normalize(), "f") if exact == exact.to_integral_value() else repr(number)
