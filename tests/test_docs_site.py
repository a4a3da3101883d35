"""The documentation site (``make docs``): ``mkdocs build --strict`` succeeds, so a broken link,
a page left out of the nav or a docstring mkdocstrings cannot render fails the suite; the API
reference has an entry for every exported name; and every page that names a sparkcast error
says where to import it from.
"""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import sparkcast
from sparkcast import errors
from tests.test_docstrings import exported_objects

ROOT = Path(__file__).resolve().parents[1]
# exported values that are not classes or functions, so carry no module of their own
CONSTANTS = {
    "sparkcast.HOLD_OVERFLOW": "sparkcast.api.options.HOLD_OVERFLOW",
    "sparkcast.MIN_WATERMARK": "sparkcast.api.timers.MIN_WATERMARK",
    "sparkcast.spark.DEAD_LETTER_SCHEMA": "sparkcast.spark.layout.DEAD_LETTER_SCHEMA",
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # material's banner about its successor
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
         str(ROOT / "mkdocs.yml"), "--site-dir", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    warnings = [line for line in built.stderr.splitlines() if "WARNING" in line]
    assert built.returncode == 0 and not warnings, (
        "mkdocs build --strict failed (the tools: pip install -e '.[docs]'; a new page: add it "
        f"to mkdocs.yml's nav; a link out of docs/: plain text instead):\n{built.stderr[-4000:]}")
    return out


def _anchors(site: Path) -> set[str]:
    found: set[str] = set()
    for page in (site / "reference").rglob("*.html"):
        found.update(re.findall(r'id="(sparkcast\.[^"]+)"', page.read_text(encoding="utf-8")))
    return found


def test_every_docs_page_is_built(site: Path) -> None:
    for page in sorted((ROOT / "docs").rglob("*.md")):
        relative = page.relative_to(ROOT / "docs").with_suffix("")
        built = site / relative / "index.html" if relative.name != "index" else \
            site / relative.parent / "index.html"
        assert built.is_file(), f"{page} was not built"


def test_the_reference_documents_every_exported_name(site: Path) -> None:
    anchors = _anchors(site)
    missing = []
    for exported, value in exported_objects().items():
        if inspect.isclass(value) or inspect.isfunction(value):
            where = f"{value.__module__}.{value.__qualname__}"
        else:
            where = CONSTANTS.get(exported, CONSTANTS.get(
                exported.replace("sparkcast.api.", "sparkcast."), exported))
        if where not in anchors:
            missing.append(f"{exported} ({where})")
    assert missing == [], "add these to a page of docs/reference/"
    # methods are documented too, inherited ones included
    assert "sparkcast.api.functions.KeyedBroadcastProcessFunction.ReadOnlyContext." \
        "get_broadcast_state" in anchors
    assert "sparkcast.testing.harness.KeyedBroadcastHarness.process_micro_batch" in anchors


def test_the_top_level_page_links_every_name_of_the_package() -> None:
    page = (ROOT / "docs" / "reference" / "sparkcast.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\[(\w+)\]\[sparkcast\.", page))
    assert linked == {*sparkcast.__all__, *sparkcast._SPARK_NAMES}


ERROR_NAMES = {name for name, value in vars(errors).items()
               if inspect.isclass(value) and issubclass(value, errors.SparkcastError)}


@pytest.mark.parametrize("page", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))],
                         ids=lambda p: p.name)
def test_a_page_that_names_an_error_says_where_to_import_it(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    named = sorted(ERROR_NAMES & set(re.findall(r"`(\w+Error)\b", text)))
    if named:
        assert "sparkcast.errors" in text, f"{page.name} names {named} but not sparkcast.errors"
