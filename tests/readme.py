"""Run the README's console examples, so the README cannot drift from the code.

A section of README.md between `<!-- readme-test: NAME -->` and `<!-- /readme-test -->`
holds ```console blocks: lines starting with `$ ` are commands (a trailing `\\` continues
them, a heredoc runs until its terminator), the lines after a command are its expected
output. Volatile values (uids, timestamps, resourceVersions, ages, IPs, container ids) are
normalised on both sides before comparing; an expected line `...` matches any lines.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"

_VOLATILE = [
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<uid>"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"), "<time>"),
    (re.compile(r'("resourceVersion": ?)"\d+"'), r'\1"<rv>"'),
    # an age is at least one number and unit: never the empty match after any word ending
    # in s, m, h or d (a container id ending in "d")
    (re.compile(r"\b(?=\d)(\d+d)?(\d+h)?(\d+m)?(\d+s)?\b(?<=[smhd])(?= |$)", re.M), "<age>"),
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


_READ_ONLY_PROGRAMS = {"jq", "sed", "sort", "head", "tail", "grep", "wc", "awk", "cut", "cat",
                      "tr", "column", "sleep", "echo", "true"}
_READ_ONLY_KUBECTL = {"get", "describe", "logs", "version", "api-resources", "api-versions",
                      "explain", "cluster-info"}
_READ_ONLY_DOCKER = {"ps", "inspect", "logs", "images"}
_CURL_WRITES = {"-X", "--request", "-d", "--data", "--data-binary", "--data-raw",
                "--data-urlencode", "-F", "--form", "-T", "--upload-file"}


def read_only(command: str) -> bool:
    """Whether running `command` again changes nothing: then its output may be awaited.

    What another process writes on its own (an Event, a status) lands a moment after what
    a previous command waited for, as with any Kubernetes client.
    """
    if "<<" in command:
        return False
    lexer = shlex.shlex(command.replace("\\\n", " "), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        return False
    commands: list[list[str]] = [[]]
    redirect = False
    for token in tokens:
        if redirect:
            if token != "/dev/null":
                return False
            redirect = False
        elif token in (">", ">>", "&>"):
            redirect = True
            if commands[-1] and commands[-1][-1].isdigit():  # 2>/dev/null
                commands[-1].pop()
        elif token and set(token) <= set("|&;"):
            commands.append([])
        else:
            commands[-1].append(token)
    return not redirect and all(_reads_only(words) for words in commands if words)


def _reads_only(words: list[str]) -> bool:
    program, args = words[0], words[1:]
    verbs = [a for a in args if not a.startswith("-")]
    if program in _READ_ONLY_PROGRAMS:
        return True
    if program == "curl":
        return not _CURL_WRITES & {a.split("=")[0] for a in args}
    if program == "kubectl":
        return bool(verbs) and verbs[0] in _READ_ONLY_KUBECTL and not (
            {"-w", "--watch", "-f", "--follow"} & set(args))
    if program == "docker":
        return bool(verbs) and verbs[0] in _READ_ONLY_DOCKER
    return False


def run(example: Example, *, replacements: dict[str, str], cwd: Path,
        env: dict[str, str] | None = None, timeout: float = 60) -> str:
    command = replace_all(example.command, replacements)
    result = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=cwd, env=env,
                            capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise AssertionError(f"README command failed ({result.returncode}):\n{command}\n"
                             f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}")
    return result.stdout


def drift(example: Example, expected: list[str], *, replacements: dict[str, str], cwd: Path,
          env: dict[str, str] | None = None, timeout: float = 60,
          settle: float = 20) -> str | None:
    """None if the example's output matches `expected`, else the output it gave.

    A read-only command is run again, for up to `settle` seconds, until it matches: a
    reader of the README types commands slower than the components write.
    """
    deadline = time.monotonic() + settle
    while True:
        output = run(example, replacements=replacements, cwd=cwd, env=env, timeout=timeout)
        if matches(expected, output):
            return None
        if not read_only(example.command) or time.monotonic() > deadline:
            return output
        time.sleep(0.5)
