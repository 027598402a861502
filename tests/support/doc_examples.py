"""The documentation's examples as tests: extract the fenced shell and Python blocks of
README.md and docs/*.md, point their addresses at a test cluster, and run them.

A block is run when its fence says `bash`, `sh`, `shell`, `console` (only the `$ ` lines) or
`python`. HTML comments right above the fence (invisible in rendered Markdown) steer it:

    <!-- doc-example: skip REASON -->       not run; the reason is required and reported
    <!-- doc-example: before COMMAND -->    a shell command run first (e.g. create a topic)
    <!-- doc-example: replace OLD => NEW --> run with OLD replaced (an id the reader copies
                                            from an earlier output, a Ctrl-C, a remote host)

A `console` block is a transcript: each `$ ` command runs on its own and must fail exactly
when the transcript shows it failing (its output starts with `error `).

Every block starts from a cluster with no topics (the runner deletes them between blocks),
so a block may create what it uses and the blocks of a page do not depend on each other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

RUNNABLE = frozenset({"bash", "sh", "shell", "console", "python"})
_FENCE = re.compile(r"^```\s*([\w+-]*)\s*$")
_MARKER = re.compile(r"^<!--\s*doc-example:\s*(skip|before|replace)\b\s*(.*?)\s*-->\s*$")
_ADDRESS = re.compile(r"\b(?:127\.0\.0\.1|localhost):(\d{2,5})\b")


class DocExampleError(ValueError):
    """A marker the runner does not understand (a skip without its reason, ...)."""


@dataclass(frozen=True)
class Block:
    path: Path
    line: int          # 1-based line of the opening fence
    lang: str
    text: str
    skip: str | None = None
    before: tuple[str, ...] = field(default=())
    replace: tuple[tuple[str, str], ...] = field(default=())

    @property
    def where(self) -> str:
        return f"{self.path.name}:{self.line}"

    @property
    def runnable(self) -> bool:
        return self.lang in RUNNABLE

    def script(self) -> str:
        """The block as run: its text with the `replace` markers applied."""
        text = self.text
        for old, new in self.replace:
            if old not in text:
                raise DocExampleError(f"{self.where}: replace {old!r}: not in the block")
            text = text.replace(old, new)
        return text

    def commands(self) -> list[tuple[str, bool]]:
        """A console transcript's commands (with their `\\` continuation lines), each with
        whether the transcript shows it failing."""
        commands: list[tuple[str, bool]] = []
        continuing = False
        for line in self.script().splitlines():
            if continuing:
                commands[-1] = (commands[-1][0] + "\n" + line, False)
            elif line.startswith("$ "):
                commands.append((line[2:], False))
            elif commands and line.startswith("error "):
                commands[-1] = (commands[-1][0], True)
            continuing = (line.startswith("$ ") or continuing) and line.rstrip().endswith("\\")
        return commands


def parse(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file, with the markers above it."""
    lines = path.read_text().splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        skip, before, replace = _markers(path, lines, index)
        blocks.append(Block(path, index + 1, opening.group(1).lower(),
                            "\n".join(lines[index + 1:end]) + "\n", skip, tuple(before),
                            tuple(replace)))
        index = end + 1
    return blocks


def _markers(path: Path, lines: list[str], fence: int):
    skip, before, replace = None, [], []
    above = fence - 1
    while above >= 0 and (marker := _MARKER.match(lines[above].strip())):
        kind, argument = marker.groups()
        where = f"{path.name}:{above + 1}: doc-example {kind}"
        if not argument:
            raise DocExampleError(f"{where} needs {'a reason' if kind == 'skip' else 'text'}")
        if kind == "skip":
            skip = argument
        elif kind == "before":
            before.insert(0, argument)
        else:
            old, sep, new = argument.partition(" => ")
            if not sep or not old:
                raise DocExampleError(f"{where}: write it as OLD => NEW")
            replace.insert(0, (old, new))
        above -= 1
    return skip, before, replace


def rewrite_addresses(text: str, ports: dict[int, str]) -> str:
    """`127.0.0.1:9876` / `localhost:8080` (the ports of `make up`) → the test cluster's
    `host:port`; other addresses are left alone."""
    return _ADDRESS.sub(lambda m: ports.get(int(m.group(1)), m.group(0)), text)


def documentation_files(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]
