"""Run the README's console examples, so the README cannot drift from the code.

A section of README.md between `<!-- readme-test: NAME -->` and `<!-- /readme-test -->`
holds ```console blocks: lines starting with `$ ` are commands (a trailing `\\` continues
them, a heredoc runs until its terminator), the lines after a command are its expected
output. Volatile values (uids, timestamps, resourceVersions, ages, IPs, container ids) are
normalised on both sides before comparing; an expected line `...` matches any lines.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"

_VOLATILE = [
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<uid>"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"), "<time>"),
    (re.compile(r'("resourceVersion": ?)"\d+"'), r'\1"<rv>"'),
    (re.compile(r"\b(\d+d)?(\d+h)?(\d+m)?(\d+s)?\b(?<=[smhd])(?= |$)", re.M), "<age>"),
    (re.compile(r"\b\d+\.\d+\.\d+\.\d+\b"), "<ip>"),
    (re.compile(r"\b[0-9a-f]{64}\b"), "<id>"),
    (re.compile(r"\b[0-9a-f]{12}\b"), "<id>"),
    (re.compile(r"[ \t]+"), " "),
]


def normalise(text: str) -> str:
    for pattern, replacement in _VOLATILE:
        text = pattern.sub(replacement, text)
    return text.strip()


@dataclass
class Example:
    command: str
    expected: list[str] = field(default_factory=list)


def section(name: str, readme: Path = README) -> str:
    text = readme.read_text()
    start = text.index(f"<!-- readme-test: {name} -->")
    end = text.index("<!-- /readme-test -->", start)
    return text[start:end]


def examples(name: str, readme: Path = README) -> list[Example]:
    found: list[Example] = []
    for block in re.findall(r"```console\n(.*?)```", section(name, readme), re.S):
        lines = block.rstrip("\n").split("\n")
        i = 0
        while i < len(lines):
            line = lines[i]
            if not line.startswith("$ "):
                if found:
                    found[-1].expected.append(line)
                i += 1
                continue
            command = [line[2:]]
            heredoc = re.search(r"<<-?'?(\w+)'?", line)
            while command[-1].endswith("\\") and i + 1 < len(lines):
                i += 1
                command.append(lines[i])
                heredoc = heredoc or re.search(r"<<-?'?(\w+)'?", lines[i])
            if heredoc:
                terminator = heredoc.group(1)
                while i + 1 < len(lines):
                    i += 1
                    command.append(lines[i])
                    if lines[i].strip() == terminator:
                        break
            found.append(Example("\n".join(command)))
            i += 1
    return found


def matches(expected: list[str], actual: str) -> bool:
    want = [normalise(line) for line in expected]
    got = [normalise(line) for line in actual.rstrip("\n").split("\n")] if actual.strip() else []
    return _match(want, got)


def _match(want: list[str], got: list[str]) -> bool:
    if not want:
        return not got
    if want[0] == "...":
        return any(_match(want[1:], got[i:]) for i in range(len(got) + 1))
    return bool(got) and want[0] == got[0] and _match(want[1:], got[1:])


def replace_all(text: str, replacements: dict[str, str]) -> str:
    for old, new in replacements.items():
        text = text.replace(old, new)
    return text


def run(example: Example, *, replacements: dict[str, str], cwd: Path,
        env: dict[str, str] | None = None, timeout: float = 60) -> str:
    command = replace_all(example.command, replacements)
    result = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=cwd, env=env,
                            capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise AssertionError(f"README command failed ({result.returncode}):\n{command}\n"
                             f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}")
    return result.stdout
