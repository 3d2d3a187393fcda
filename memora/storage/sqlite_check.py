"""Is an SQLite file usable: a database, with sound pages, that takes a write lock. The start-up
checks (memora.startup) ask it of the database and of the embedded memory store's file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from memora.errors import StartupError


def check_sqlite(path: Path, what: str, *, writable: bool = True) -> None:
    """One SQLite file: it is a database, its pages are sound, and (with `writable`) it takes a
    write lock."""
    mode = "rw" if writable else "ro"
    try:
        con = sqlite3.connect(f"file:{path}?mode={mode}", uri=True, timeout=5)
    except sqlite3.Error as exc:
        raise StartupError(f"{what} {path} cannot be opened: {exc}") from None
    try:
        verdict = con.execute("PRAGMA quick_check").fetchone()
        if verdict is None or verdict[0] != "ok":
            found = verdict[0] if verdict else "no answer"
            raise StartupError(f"{what} {path} is damaged (integrity check: {found})")
        if writable:
            con.execute("BEGIN IMMEDIATE")
            con.execute("ROLLBACK")
    except sqlite3.Error as exc:
        raise StartupError(f"{what} {path} cannot be used: {exc}") from None
    finally:
        con.close()
