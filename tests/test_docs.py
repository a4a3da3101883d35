"""Every fenced ``python`` and ``bash`` block of README.md and docs/*.md runs, so no documented
example can drift from the code. The blocks of one page share a namespace, in order, like a
doctest session; Spark blocks get the test session as ``spark``, and blocks that name
``kafka_broker`` the suite's throwaway broker (``sparkcast.testing.kafka``). A block is
skipped only with a visible marker and a reason on the line before it:
``<!-- no-run: needs a cluster -->``.

A walk-through page (``ONE_SHELL``) runs as a newcomer pastes it: every block in order in one
bash shell in an empty folder (a ``cd`` carries over), a ``python`` block fed to ``python`` in
that shell, so it must import what it uses. A block that shows a file the page's commands wrote
(``<!-- file: shop/job.py -->`` before it) is not run but must be found in that file.
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
FILE = re.compile(r"^<!--\s*file:\s*(\S+)\s*-->$")
RUNNABLE = ("python", "bash")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    language: str
    code: str
    no_run: str | None
    file: str | None = None

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
        marker, shown = NO_RUN.match(before), FILE.match(before)
        if fence.group(1) in RUNNABLE:
            found.append(Block(page, at + 1, fence.group(1), "\n".join(lines[at + 1:end]),
                               marker.group(1) if marker else None,
                               shown.group(1) if shown else None))
        at = end + 1
    return found


# walk-through pages: run top to bottom in one shell, as a newcomer copies them
ONE_SHELL = ("getting-started.md",)
ALL = [block for page in PAGES for block in blocks(page)]
RUN = [block for block in ALL if block.no_run is None and block.page.name not in ONE_SHELL]
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


def venv_env() -> dict[str, str]:
    """This interpreter's scripts (``sparkcast``, ``python``) first on PATH, as in an active
    virtualenv."""
    return {**os.environ,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def shell_script(page_blocks: list[Block]) -> str:
    """The page as one bash script: its bash blocks, its python blocks as ``python`` input;
    skipped and shown-file blocks left out."""
    parts = []
    for block in page_blocks:
        if block.no_run or block.file:
            continue
        parts.append(block.code if block.language == "bash"
                     else f"python - <<'END_OF_BLOCK'\n{block.code}\nEND_OF_BLOCK")
    return "\n".join(parts) + "\n"


@pytest.mark.spark
@pytest.mark.fresh_jvm
@pytest.mark.parametrize("name", ONE_SHELL)
def test_a_walk_through_runs_top_to_bottom_in_one_shell(name: str, tmp_path: Path) -> None:
    page_blocks = blocks(ROOT / "docs" / name)
    run = subprocess.run(["bash", "-euo", "pipefail", "-c", shell_script(page_blocks)],
                         cwd=tmp_path, env=venv_env(), capture_output=True, text=True,
                         timeout=900, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    for block in page_blocks:
        if block.file:
            shown = tmp_path / block.file
            assert shown.is_file(), f"{block.id} shows {block.file}, which the page never wrote"
            assert block.code.strip() in shown.read_text(encoding="utf-8"), block.id


def _needs_spark(block: Block) -> bool:
    """A block that uses ``spark`` or the broker (a JVM either way), or follows one on its
    page (it may use what that made)."""
    page = [b for b in RUN if b.page == block.page]
    first = next((b.line for b in page if "spark" in b.code or "kafka_broker" in b.code),
                 None)
    return first is not None and block.line >= first


@pytest.mark.parametrize("block", [
    pytest.param(b, marks=[pytest.mark.spark] if _needs_spark(b) else []) for b in RUN],
    ids=[b.id for b in RUN])
def test_block_runs(block: Block, request: pytest.FixtureRequest) -> None:
    if block.language == "bash":
        subprocess.run(["bash", "-euo", "pipefail", "-c", block.code], cwd=ROOT, check=True,
                       timeout=600, env=venv_env())
        return
    namespace = _NAMESPACES.setdefault(block.page, {"__name__": f"doc_{block.page.stem}"})
    if "spark" in block.code and "spark" not in namespace:
        namespace["spark"] = request.getfixturevalue("spark")
    if "kafka_broker" in block.code and "kafka_broker" not in namespace:
        namespace["kafka_broker"] = request.getfixturevalue("kafka_broker")
    # dont_inherit: a block runs as a user's script does, without this module's
    # ``from __future__ import annotations`` (under which a dataclass in a block cannot resolve)
    exec(compile(block.code, block.id, "exec", dont_inherit=True), namespace)  # noqa: S102
