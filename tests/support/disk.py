"""What is on disk: which files under a folder hold given words (deletion tests)."""

from __future__ import annotations

from pathlib import Path


def files_holding(root: Path, needle: str) -> list[str]:
    """Every file under root whose bytes contain the needle (UTF-8 or its JSON-escaped form)."""
    forms = {needle.encode(), needle.lower().encode(), needle.upper().encode()}
    hits = []
    for path in sorted(root.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            if any(f in data for f in forms):
                hits.append(str(path.relative_to(root)))
    return hits
