"""Every fenced ``python`` and ``bash`` block of README.md and docs/*.md runs, so no documented
example can drift from the code. The blocks of one page share a namespace, in order, like a
doctest session; Spark blocks get the test session as ``spark``. A block is skipped only with a
visible marker and a reason on the line before it: ``<!-- no-run: needs a cluster -->``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\s*$")
NO_RUN = re.compile(r"^<!--\s*no-run:\s*(\S.*?)\s*-->$")
RUNNABLE = ("python", "bash")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    language: str
    code: str
    no_run: str | None

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    found: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    at = 0
    while at < len(lines):
        fence = FENCE.match(lines[at])
        if fence is None:
            at += 1
            continue
        end = next(i for i in range(at + 1, len(lines)) if lines[i].startswith("```"))
        before = next((lines[i].strip() for i in range(at - 1, -1, -1) if lines[i].strip()), "")
        marker = NO_RUN.match(before)
        if fence.group(1) in RUNNABLE:
            found.append(Block(page, at + 1, fence.group(1), "\n".join(lines[at + 1:end]),
                               marker.group(1) if marker else None))
        at = end + 1
    return found


ALL = [block for page in PAGES for block in blocks(page)]
RUN = [block for block in ALL if block.no_run is None]
_NAMESPACES: dict[Path, dict[str, Any]] = {}


# a page of commands for machines this one is not (clusters, brokers): its blocks may not run
FOR_OTHER_MACHINES = ("deploy.md",)
REASON = re.compile(r"^(needs|not tested here|builds|would)\b")


def test_blocks_are_found_and_skips_are_rare():
    assert len(ALL) >= 5
    skipped = [b for b in ALL if b.no_run]
    unexplained = [b.id for b in skipped if not REASON.match(b.no_run or "")]
    assert not unexplained, f"a no-run marker must say what is missing here: {unexplained}"
    local = [b for b in ALL if b.page.name not in FOR_OTHER_MACHINES]
    local_skipped = [b.id for b in local if b.no_run]
    assert len(local_skipped) <= len(local) // 3, f"too many no-run blocks: {local_skipped}"


@pytest.mark.parametrize("block", RUN, ids=[b.id for b in RUN])
def test_block_runs(block: Block, request: pytest.FixtureRequest) -> None:
    if block.language == "bash":
        # this interpreter's scripts (``sparkcast``, ``python``) first, as in an active venv
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        subprocess.run(["bash", "-euo", "pipefail", "-c", block.code], cwd=ROOT, check=True,
                       timeout=600, env={**os.environ, "PATH": path})
        return
    namespace = _NAMESPACES.setdefault(block.page, {"__name__": f"doc_{block.page.stem}"})
    if "spark" in block.code and "spark" not in namespace:
        namespace["spark"] = request.getfixturevalue("spark")
    # dont_inherit: a block runs as a user's script does, without this module's
    # ``from __future__ import annotations`` (under which a dataclass in a block cannot resolve)
    exec(compile(block.code, block.id, "exec", dont_inherit=True), namespace)  # noqa: S102
