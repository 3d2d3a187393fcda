"""Secrets out of a Telegram update before any byte of it is written or handled.

The durable inbox writes each update before it is handled, so the secret filter
(`memora.privacy.secretfilter`) runs on the update itself: every `text` and `caption` in it (the
message, an edited message, the message it replies to, a quote) gets its secrets replaced by
the mask, and the formatting entities that follow a mask move with it (Telegram counts their
offsets in UTF-16 code units). The masked update is what the inbox keeps and what the handlers
see, so the model, the history and the outbox never hold the secret either.
"""

from __future__ import annotations

import json
from typing import Any

from telegram import Update

from memora.privacy.secretfilter import MASK, secret_spans

__all__ = ["masked_update"]

_TEXT_FIELDS = (("text", "entities"), ("caption", "caption_entities"))


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _mask_field(node: dict[str, Any], field: str, entities_key: str) -> bool:
    """Mask node[field] in place, moving or dropping node[entities_key]; whether it changed."""
    text = node.get(field)
    if not isinstance(text, str):
        return False
    spans = secret_spans(text)
    if not spans:
        return False
    pieces, at = [], 0
    units = []  # each span in UTF-16 units: (start, end, how much the mask shifts what follows)
    for start, end in spans:
        pieces += [text[at:start], MASK]
        u_start, u_end = _utf16(text[:start]), _utf16(text[:end])
        units.append((u_start, u_end, len(MASK) - (u_end - u_start)))
        at = end
    pieces.append(text[at:])
    node[field] = "".join(pieces)
    entities = node.get(entities_key)
    if isinstance(entities, list):
        kept = []
        for entity in entities:
            offset, length = int(entity.get("offset", 0)), int(entity.get("length", 0))
            if any(offset < u_end and u_start < offset + length for u_start, u_end, _ in units):
                continue  # formatting on the secret itself goes with it
            shift = sum(delta for _, u_end, delta in units if u_end <= offset)
            kept.append({**entity, "offset": offset + shift})
        node[entities_key] = kept
    return True


def _mask_tree(node: Any) -> bool:
    changed = False
    if isinstance(node, dict):
        for field, entities_key in _TEXT_FIELDS:
            changed |= _mask_field(node, field, entities_key)
        for value in node.values():
            changed |= _mask_tree(value)
    elif isinstance(node, list):
        for value in node:
            changed |= _mask_tree(value)
    return changed


def masked_update(update: Update) -> Update:
    """The update with every secret in its texts masked; the same object when it held none."""
    data = json.loads(json.dumps(update.to_dict()))
    if not _mask_tree(data):
        return update
    try:
        bot = update.get_bot()
    except RuntimeError:  # an update built by hand (tests) has no bot to carry over
        bot = None
    return Update.de_json(data, bot)
