"""BFCL items read straight out of the ``bfcl-eval`` wheel (downloaded, never installed).

The wheel holds one JSON object per line: questions with their function docs in
``bfcl_eval/data/BFCL_v4_<category>.json`` and allowed answers in
``bfcl_eval/data/possible_answer/BFCL_v4_<category>.json``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BFCL_VERSION = "2026.3.23"
CATEGORIES = ("parallel", "parallel_multiple")
DEFAULT_CACHE = Path(__file__).resolve().parent.parent / ".cache" / "bfcl"
_DATA_DIR = "bfcl_eval/data/"


@dataclass
class Item:
    """One BFCL question with its tools and the calls that answer it."""

    id: str
    category: str
    messages: list[dict[str, Any]]
    functions: list[dict[str, Any]]
    ground_truth: list[dict[str, dict[str, list[Any]]]] = field(default_factory=list)

    @property
    def question(self) -> str:
        """The user's text (all user turns, joined)."""
        return "\n".join(m["content"] for m in self.messages if m.get("role") == "user")


def wheel_path(cache: Path = DEFAULT_CACHE, version: str = BFCL_VERSION) -> Path:
    """The cached wheel, downloaded with ``pip download --no-deps`` when missing."""
    cache.mkdir(parents=True, exist_ok=True)
    found = sorted(cache.glob(f"bfcl_eval-{version}-*.whl"))
    if found:
        return found[0]
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
         "-q", f"bfcl-eval=={version}", "-d", str(cache)],
        check=True,
    )  # fmt: skip
    found = sorted(cache.glob(f"bfcl_eval-{version}-*.whl"))
    if not found:
        raise FileNotFoundError(f"pip did not leave a bfcl_eval {version} wheel in {cache}.")
    return found[0]


def _json_lines(archive: zipfile.ZipFile, name: str) -> list[dict[str, Any]]:
    text = archive.read(name).decode("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def load_items(wheel: Path, categories: tuple[str, ...] | list[str] = CATEGORIES) -> list[Item]:
    """Every item of the given categories, with its ground truth, in file order.

    Raises:
        KeyError: A category's question or answer file is not in the wheel.
    """
    items: list[Item] = []
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        for category in categories:
            questions = f"{_DATA_DIR}BFCL_v4_{category}.json"
            answers = f"{_DATA_DIR}possible_answer/BFCL_v4_{category}.json"
            missing = [n for n in (questions, answers) if n not in names]
            if missing:
                raise KeyError(f"{wheel.name} has no {', '.join(missing)}")
            truth = {a["id"]: a["ground_truth"] for a in _json_lines(archive, answers)}
            for q in _json_lines(archive, questions):
                turns = q["question"]
                messages = turns[0] if turns and isinstance(turns[0], list) else turns
                items.append(
                    Item(
                        id=q["id"],
                        category=category,
                        messages=messages,
                        functions=q["function"],
                        ground_truth=truth[q["id"]],
                    )
                )
    return items
