"""MkDocs hook: Sphinx roles in the docstrings (``:class:`~llm_compiler.x.C```) become
cross-references of the API reference, or plain code where the target is not documented."""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(
    r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj):<code>(~?)([\w.]+)(\(\))?</code>"
)


def _reference(match: re.Match[str]) -> str:
    short, target, call = match.group(1), match.group(2), match.group(3) or ""
    shown = (target.rsplit(".", 1)[-1] if short else target) + call
    return f'<autoref identifier="{target}" optional><code>{shown}</code></autoref>'


def on_page_content(html: str, **kwargs: Any) -> str:
    """Rewrite each role in a page's HTML (the autorefs plugin resolves them later)."""
    return _ROLE.sub(_reference, html)
