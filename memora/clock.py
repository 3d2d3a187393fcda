"""The one clock: every timestamp the product stores or shows, and every "today", comes from
:func:`now`.

Tests move it (:func:`use`), never sleep. A real process under test moves it with the test-only
environment variable ``MEMORA_TEST_CLOCK_FILE``: the path of a file holding an ISO 8601 time,
read on every call while the variable is set, so a test can move a running ``memora run``
by rewriting the file (an empty or missing file is the real time). Production never sets it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

__all__ = ["TEST_CLOCK_ENV", "as_utc", "now", "use", "utcnow"]

TEST_CLOCK_ENV = "MEMORA_TEST_CLOCK_FILE"

Source = Callable[[], datetime]
_source: Source | None = None


def use(source: Source | None) -> None:
    """Take every timestamp from `source` from now on (None: the real clock again)."""
    global _source
    _source = source


def _from_test_file() -> datetime | None:
    path = os.environ.get(TEST_CLOCK_ENV)
    if not path:
        return None
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return datetime.fromisoformat(text) if text else None


def now() -> datetime:
    """The current time, aware, in UTC."""
    when = _source() if _source is not None else _from_test_file()
    return as_utc(when) if when is not None else datetime.now(UTC)


def as_utc(when: datetime | None = None) -> datetime:
    """`when` (now when None) as an aware UTC datetime; a naive datetime is taken as UTC."""
    when = when or now()
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def utcnow(when: datetime | None = None) -> str:
    """`when` (now when None) in UTC as ISO 8601 to the second: how timestamps are stored."""
    return as_utc(when).isoformat(timespec="seconds")
