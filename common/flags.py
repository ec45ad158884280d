"""Command-line values read as kube's components read them (Go's flag package)."""

from __future__ import annotations

import argparse


def boolean(text: str) -> bool:
    """`--leader-elect=false`, `--anonymous-auth=1`: Go's strconv.ParseBool, less its
    rarely used spellings."""
    value = text.strip().lower()
    if value in ("1", "t", "true"):
        return True
    if value in ("0", "f", "false"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean {text!r} (true or false)")
