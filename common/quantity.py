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
from decimal import ROUND_UP, Decimal, InvalidOperation

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


_NANO = Decimal("1e-9")
_DECIMAL_SUFFIXES = {exponent: suffix for suffix, exponent in _DECIMAL_SI.items()}
_BINARY_SUFFIXES = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]


def parse_quantity(text: str) -> Decimal:
    """The value of a quantity, or QuantityError worded like resource.ParseQuantity.

    Like Kubernetes, precision below 1n is rounded up (away from zero).
    """
    return _parse(text)[0]


def _parse(text: str) -> tuple[Decimal, str]:
    """(value, format): format is "BinarySI", "DecimalExponent" or "DecimalSI"."""
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
        value = Decimal(number) * multiplier
    except InvalidOperation:
        raise QuantityError(NUMERIC_WRONG) from None
    if int(value.as_tuple().exponent) < -9:
        value = value.quantize(_NANO, rounding=ROUND_UP)
    if suffix in _BINARY_SI:
        form = "BinarySI"
    elif suffix[:1] in ("e", "E") and len(suffix) > 1:
        form = "DecimalExponent"
    else:
        form = "DecimalSI"
    return (-value if sign == "-" else value), form


def canonical_quantity(text: str) -> str:
    """The form Kubernetes writes a quantity back in (Quantity.String()).

    `0.5` -> `500m`, `1000m` -> `1`, `2000` -> `2k`, `1.5Gi` -> `1536Mi`, `1e3` -> `1e3`.
    """
    value, form = _parse(text)
    if value == 0:
        return "0"
    if form == "BinarySI" and not -1024 < value < 1024 and value == value.to_integral_value():
        number, exponent = int(value), 0
        while number % 1024 == 0 and exponent < len(_BINARY_SUFFIXES) - 1:
            number, exponent = number // 1024, exponent + 1
        return f"{number}{_BINARY_SUFFIXES[exponent]}"
    sign, digits, raw_exponent = value.as_tuple()
    mantissa, exponent = int("".join(map(str, digits))), int(raw_exponent)
    while mantissa % 10 == 0:
        mantissa, exponent = mantissa // 10, exponent + 1
    shift = exponent % 3  # down to a multiple of 3: 1.1e5 is 110e3
    mantissa, exponent = mantissa * 10**shift, exponent - shift
    if form == "DecimalSI" and exponent in _DECIMAL_SUFFIXES:
        suffix = _DECIMAL_SUFFIXES[exponent]
    else:
        suffix = f"e{exponent}" if exponent else ""
    return f"{'-' if sign else ''}{mantissa}{suffix}"


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
    """The canonical string of a quantity given as a JSON string or number; QuantityError if not.

    Quantities arrive as strings (`"100m"`) or JSON numbers (`1`, `0.5`), as
    resource.Quantity.UnmarshalJSON accepts them, and are written back canonical.
    """
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise QuantityError(FORMAT_WRONG)
    text = value.strip() if isinstance(value, str) else number_text(value)
    return canonical_quantity(text)


def number_text(number: int | float) -> str:
    if isinstance(number, int):
        return str(number)
    exact = Decimal(repr(number))
    return format(exact.normalize(), "f") if exact == exact.to_integral_value() else repr(number)
