"""Writing one bench's section of ``bench/RESULTS.md``: each bench owns the section under its
heading and rewrites only that, leaving the others' sections as they are."""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def write_section(heading: str, source: str, lines: list[str], note: str = "") -> None:
    """Replace (or append) the section under ``heading``; ``source`` names what wrote it."""
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    section = [
        heading,
        "",
        f"Written by {source} on {stamp}. Machine: {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, shared with other work while it ran.",
        *([note, ""] if note else [""]),
        *lines,
        "",
    ]
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    start = text.find(heading)
    if start >= 0:
        end = text.find("\n## ", start + len(heading))
        text = text[:start] + text[end + 1 :] if end >= 0 else text[:start]
    RESULTS.write_text(text.rstrip("\n") + "\n\n" + "\n".join(section))


HEADLINE = "## Headline: steady figures per step"
"""The short table at the top of RESULTS.md (``bench/steady.py --write``)."""
EARLIER = "## Earlier headlines"
"""Where a headline goes when a newer one replaces it, newest first."""


END = "<!-- the headlines end here -->"
"""Closes the headline sections: the text after it (the file's own introduction) is not theirs."""


def _cut(text: str, heading: str) -> tuple[str, str]:
    """``text`` without the section under ``heading``, and that section's body."""
    start = text.find(f"\n{heading}\n")
    if start < 0:
        return text, ""
    ends = [text.find(m, start + len(heading) + 2) for m in ("\n## ", f"\n{END}")]
    end = min([e for e in ends if e >= 0], default=len(text))
    body = text[start + len(heading) + 2 : end].strip("\n")
    return text[:start] + text[end:], body


def headline_sections(text: str) -> str:
    """The headline and the earlier headlines of a RESULTS.md, as written: kept by a bench
    that rewrites the top of the file."""
    _, headline = _cut(text, HEADLINE)
    _, earlier = _cut(text, EARLIER)
    parts = [f"{HEADLINE}\n\n{headline}\n"] if headline else []
    parts += [f"{EARLIER}\n\n{earlier}\n"] if earlier else []
    return "\n".join([*parts, END]) if parts else ""


def write_headline(lines: list[str]) -> None:
    """Put ``lines`` at the top of RESULTS.md as the headline; the headline they replace goes
    first under the earlier headlines, its own headings one level down."""
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    text, old = _cut(text, HEADLINE)
    text, earlier = _cut(text, EARLIER)
    if old:
        earlier = old.replace("\n### ", "\n#### ") + ("\n\n" + earlier if earlier else "")
    title, _, rest = text.replace(f"{END}\n", "").partition("\n")
    top = [title, "", HEADLINE, "", *lines, ""]
    if earlier:
        top += [EARLIER, "", earlier, ""]
    RESULTS.write_text("\n".join([*top, END]) + "\n\n" + rest.lstrip("\n"))
