"""Input at the adapter boundary: what a learner typed, made safe to store and echo, and a
command line split into its parts (`split_command`).

Both adapters (Telegram, terminal) pass every incoming text through `clean` before the core sees
it, so the core never meets:

- lone surrogates (invalid UTF-8 read by the terminal with surrogateescape, or a ``\\ud800``
  escape in Telegram's JSON): they cannot be encoded, so storing or printing them crashed; each
  becomes U+FFFD, the replacement character, so nothing else of the message is lost;
- NUL and the other C0/C1 control characters (tab and newlines kept): stored and echoed before,
  invisible or harmful in logs and terminals;
- a message of nothing but invisible characters (zero-width spaces and joiners, word joiners,
  BOMs, soft hyphens, whitespace): it becomes "" and gets the core's clear answer for an empty
  message instead of a turn. Zero-width characters inside real text stay (a ZWJ is part of
  many emoji).

Text is also put in Unicode NFC, so the same word typed two ways is stored one way.
"""

from __future__ import annotations

import re
import unicodedata

_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_INVISIBLE = re.compile("[\\s\u00ad\u034f\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\ufeff]")


def clean(text: str) -> str:
    """The text with lone surrogates replaced, control characters removed and NFC applied;
    "" when nothing visible is left."""
    text = _SURROGATE.sub("\ufffd", text)
    text = _CONTROL.sub("", text)
    text = unicodedata.normalize("NFC", text)
    return "" if not _INVISIBLE.sub("", text) else text


def split_command(text: str) -> tuple[str, str, str]:
    """'/remember@bot I like tea' → ('remember', 'bot', 'I like tea'); the name in lower case,
    the target (the bot a group command names) "" when there is none."""
    head, _, arg = text.strip().partition(" ")
    if "\n" in head:  # "/remember\nsome text"
        head, _, more = head.partition("\n")
        arg = f"{more} {arg}".strip()
    name, _, target = head.removeprefix("/").partition("@")
    return name.lower(), target, arg.strip()
