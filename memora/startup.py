"""Start-up checks: a store that cannot be used ends the process with one clear line.

Why: a damaged database or a read-only volume used to surface as a traceback in the middle of the
bot's start-up, and the process then stayed alive doing nothing. These checks run before the
stores are opened (`memora.app.open_engine`), and whatever still fails while opening them is
turned into the same one-line `StartupError`, which the CLI prints before exiting non-zero.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from memora.config import Settings
from memora.errors import StartupError as StartupError  # re-exported
from memora.storage.file_erasure import CHROMA_FILE
from memora.storage.sqlite_check import check_sqlite

__all__ = ["StartupError", "check_stores"]


def check_stores(settings: Settings, *, writable: bool = True) -> None:
    """The data folder exists (or can be made) and, with `writable`, takes writes; both SQLite
    files that exist pass `PRAGMA quick_check` (and a write lock, with `writable`)."""
    data = settings.storage.data_dir
    if data.exists() and not data.is_dir():
        raise StartupError(f"storage.data_dir {data} is not a folder")
    try:
        data.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StartupError(f"cannot create storage.data_dir {data}: {exc.strerror}") from None
    if writable:
        _check_writable(data)
    files = [
        (settings.db_path, "the database"),
        (settings.chroma_path / CHROMA_FILE, "the memory store"),
    ]
    for path, what in files:
        if path.exists():
            check_sqlite(path, what, writable=writable)


def _check_writable(folder: Path) -> None:
    try:
        fd, name = tempfile.mkstemp(prefix=".memora-write-check-", dir=folder)
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        raise StartupError(
            f"storage.data_dir {folder} is not writable ({exc.strerror}): "
            "is the volume mounted read-only?"
        ) from None
