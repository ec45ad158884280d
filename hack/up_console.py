"""What `make up` shows on the console: one prefixed line per component event worth seeing.

The components log in two shapes:
  Python (logging):  `2026-11-29 17:56:14,123 scheduler INFO message`
                     `2026-11-29 17:56:14,123 INFO kubelet: message`
  etcd (zap JSON):   `{"level":"warn","ts":"2026-11-29T17:56:15.038Z","msg":"message",...}`
INFO and above are shown, minus routine chatter; a traceback is shown under the ERROR
line it belongs to; anything else (uvicorn banners, raw prints) stays in the log file.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass

LEVELS = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "WARN": 30, "ERROR": 40, "CRITICAL": 50,
          "FATAL": 50, "PANIC": 50, "DPANIC": 50}
SHOWN_FROM = LEVELS["INFO"]
ETCD_SHOWN_FROM = LEVELS["WARNING"]

PYTHON_RECORD = re.compile(
    r"^\d{4}-\d\d-\d\d (?P<time>\d\d:\d\d:\d\d),\d+ "
    r"(?:(?P<level1>[A-Z]+) (?P<logger1>\S+?):? |(?P<logger2>\S+) (?P<level2>[A-Z]+) )"
    r"(?P<message>.*)$")

# Routine messages that would drown the interesting ones.
CHATTER = (
    re.compile(r"watch ended after \d+ events"),
    re.compile(r"watching again in"),
    re.compile(r"^(Started server process|Waiting for application|Application startup|"
               r"Uvicorn running on|Shutting down|Waiting for connections|Finished server|"
               r"Application shutdown)"),
    re.compile(r"simple token is not cryptographically signed"),
    # The apiserver storing an Event: the component that reported it has said it already.
    re.compile(r"^(created|deleted|marked for deletion) events "),
)


@dataclass(frozen=True)
class Record:
    time: str
    level: int
    message: str


def parse_python_record(line: str) -> Record | None:
    match = PYTHON_RECORD.match(line)
    if not match:
        return None
    level_name = match["level1"] or match["level2"]
    if level_name not in LEVELS:
        return None
    return Record(match["time"], LEVELS[level_name], match["message"])


def parse_zap_record(line: str) -> Record | None:
    if not line.startswith("{"):
        return None
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    if not isinstance(entry, dict) or "msg" not in entry:
        return None
    timestamp = str(entry.get("ts", ""))
    clock = timestamp[11:19] if len(timestamp) >= 19 else time.strftime("%H:%M:%S")
    extras = {k: v for k, v in entry.items() if k not in ("level", "ts", "caller", "msg")}
    message = str(entry["msg"]) + (f" {json.dumps(extras)}" if extras else "")
    return Record(clock, LEVELS.get(str(entry.get("level", "info")).upper(), 20), message)


def is_chatter(message: str) -> bool:
    return any(pattern.search(message) for pattern in CHATTER)


def prefix(name: str, width: int) -> str:
    return f"[{name}]".ljust(width + 2)


def render(clock: str, name: str, message: str, *, level: int, width: int) -> str:
    level_word = "" if level <= SHOWN_FROM else next(
        word for word, value in LEVELS.items() if value == level) + " "
    return f"{clock} {prefix(name, width)} {level_word}{message}"


def format_own_line(message: str, *, width: int) -> str:
    """A line of the launcher itself."""
    return render(time.strftime("%H:%M:%S"), "kubelite", message, level=SHOWN_FROM, width=width)


@dataclass
class ConsoleFilter:
    """Per component: decides which log lines reach the console, and how they look."""

    in_error: bool = False  # the lines after an ERROR record (its traceback) are shown too

    def format(self, name: str, line: str, *, width: int) -> str | None:
        if not line.strip():
            return None
        record = parse_python_record(line) or parse_zap_record(line)
        if record is None:
            if self.in_error:
                return f"{' ' * 8} {prefix(name, width)}   {line}"
            return None
        self.in_error = record.level >= LEVELS["ERROR"]
        threshold = ETCD_SHOWN_FROM if line.startswith("{") else SHOWN_FROM
        if record.level < threshold or is_chatter(record.message):
            return None
        return render(record.time, name, record.message, level=record.level, width=width)
