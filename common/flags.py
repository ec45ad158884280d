"""Command-line values read as kube's components read them (Go's flag package)."""

from __future__ import annotations

import argparse
import re


def boolean(text: str) -> bool:
    """`--leader-elect=false`, `--anonymous-auth=1`: Go's strconv.ParseBool, less its
    rarely used spellings."""
    value = text.strip().lower()
    if value in ("1", "t", "true"):
        return True
    if value in ("0", "f", "false"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean {text!r} (true or false)")


_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration(text: str) -> float:
    """Seconds of a Go-style duration flag: `15s`, `1.5s`, `500ms`, `1m`, or bare seconds."""
    match = re.fullmatch(r"(\d+(?:\.\d*)?)(ms|s|m|h)?", text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r} (e.g. 15s, 500ms)")
    return float(match.group(1)) * _DURATION_UNITS[match.group(2) or "s"]


def add_duration(parser: argparse.ArgumentParser | argparse._ArgumentGroup, flag: str,
                 default: float, help_text: str) -> None:
    """A duration flag whose help ends with its default, as Go's (`(default: 15s)`)."""
    shown = f"{default:g}s"
    parser.add_argument(flag, type=duration, default=default, metavar="DURATION",
                        help=f"{help_text} (default: {shown})" if help_text
                        else f"(default: {shown})")
