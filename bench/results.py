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
