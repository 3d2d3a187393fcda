"""The learner's page as JSON: what it shows (`GET /app/api/me`) and each action on it, every one a
call into the same core the chat commands use (the same deletion as /forget, the same pin as
/pin, the same profile change as /profile set, the same export data, the same forgetting as
/forgetme).

Every handler is given the learner from the signed initData (bot/web/auth.py), never from the
request's path, query or body: an id in the path only names one of that learner's own items.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from memora.commands import pins
from memora.commands.registry import CommandContext, run_command
from memora.engine import Engine
from memora.engine.queries import memory_text_refusal
from memora.errors import MemoryNotFound
from memora.learner import progress as progress_view
from memora.learner.learner_commands import profile_command
from memora.learner.model import FIELD_HELP, PROFILE_FIELDS
from memora.longterm import Memory
from memora.types import ChatRef, UserRef

from .labels import labels

MAX_BODY = 4096  # an edit or a profile value is short


def error(status: int, message: str) -> JSONResponse:
    """A refusal: the status and a short JSON error."""
    return JSONResponse({"error": message}, status_code=status)


async def body_text(request: Request, key: str) -> str | None:
    """One string field of a small JSON body; None when the body is not that."""
    raw = await request.body()
    if len(raw) > MAX_BODY:
        return None
    try:
        data = json.loads(raw or b"{}")
    except ValueError:
        return None
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


def _memory(m: Memory, sources: dict[str, str]) -> dict[str, Any]:
    return {
        "id": m.id,
        "text": m.text,
        "category": m.category,
        "source": m.source,
        "created_at": m.created_at,
        "updated_at": m.updated_at,
        "source_message": sources.get(m.id),
        "history": [{"text": r.text, "at": r.replaced_at, "reason": r.reason} for r in m.history],
        # when it became true and when it stops or stopped (as said), and /pin
        "pinned": m.pinned_at is not None,
        "since": m.since,
        "until": m.until,
    }


class LearnerApi:
    """The page's JSON endpoints over one engine."""

    def __init__(self, engine: Engine, admin_ids: list[int]) -> None:
        self.engine = engine
        self.admin_ids = admin_ids

    async def me(self, user: UserRef, lang: str) -> dict[str, Any]:
        """Everything the page shows the learner."""
        engine, uid, now = self.engine, user.id, self.engine.state.now()
        memories = await engine.queries.memories(uid) if engine.has_memory else []
        sources = await engine.queries.memory_sources(uid, memories)
        profile = await engine.learner.profile(uid, now)
        history: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for c in await engine.learner.profiles.history(uid):
            history[c.field].append(
                {
                    "at": c.at,
                    "old": c.old_value,
                    "new": c.new_value,
                    "source": c.source,
                    "undone": bool(c.undone_at),
                }
            )
        due = {
            (term, meaning): card.due.isoformat()
            for card, term, meaning, _example in await engine.learner.cards.card_parts(uid)
            if card.kind == "word"
        }
        words = await engine.learner.entries.words(uid)
        for w in words:
            w["next_review"] = due.get((w["term"], w["meaning"]))
        p = await engine.learner.progress(uid, now)
        return {
            "user": {"id": uid, "name": user.name},
            "lang": lang,
            "labels": labels(),
            "is_admin": uid in self.admin_ids,
            "memories": [_memory(m, sources) for m in memories],
            "profile": [
                {
                    "field": name,
                    "help": FIELD_HELP.get(name, ""),
                    "value": profile.fields[name].value if name in profile.fields else None,
                    "source": profile.fields[name].source if name in profile.fields else None,
                    "updated_at": (
                        profile.fields[name].updated_at if name in profile.fields else None
                    ),
                    "history": history.get(name, []),
                }
                for name in PROFILE_FIELDS
            ],
            "mistakes": await engine.learner.entries.mistakes(uid),
            "words": words,
            "progress": progress_view.render(p, now),
        }

    async def progress_chart(self, user: UserRef) -> Response:
        p = await self.engine.learner.progress(user.id, self.engine.state.now())
        return Response(progress_view.chart(p), media_type="image/png")

    async def delete_memory(self, user: UserRef, memory_id: str) -> Response:
        """The same real deletion as /forget; another learner's id finds nothing."""
        memory = (
            await self.engine.queries.memory(user.id, memory_id) if self.engine.has_memory else None
        )
        if memory is None:
            return error(404, "no such memory")
        await self.engine.queries.forget_memory(user.id, memory)
        return JSONResponse({"deleted": memory_id})

    async def edit_memory(self, user: UserRef, memory_id: str, text: str | None) -> Response:
        if text is None:
            return error(400, "a JSON body with 'text' is needed")
        refusal = memory_text_refusal(text.strip())
        if refusal is not None:
            return error(400, refusal)
        if not self.engine.has_memory:
            return error(404, "no such memory")
        try:
            memory = await self.engine.queries.edit_memory(user.id, memory_id, text)
        except MemoryNotFound:
            return error(404, "no such memory")
        return JSONResponse(_memory(memory, {}))

    async def undo_memory(self, user: UserRef, memory_id: str) -> Response:
        restored = (
            await self.engine.queries.undo_memory(user.id, memory_id)
            if self.engine.has_memory
            else None
        )
        if restored is None:
            return error(404, "nothing to undo")
        return JSONResponse(_memory(restored, {}))

    async def pin_memory(self, user: UserRef, memory_id: str, pinned: bool) -> Response:
        """/pin or /unpin on one of the learner's memories, with the command's answer (its
        warning when the pins are more than the memory budget); another learner's id finds
        nothing."""
        engine, uid = self.engine, user.id
        if not engine.has_memory:
            return error(404, "no such memory")
        if pinned:
            reply = await pins.pin(engine, uid, memory_id)
        else:
            reply = await pins.unpin(engine, uid, memory_id)
        if reply is None:
            return error(404, "no such memory")
        if not reply.ok:
            return error(400, reply.text)
        return JSONResponse({"message": reply.text})

    async def set_profile(self, user: UserRef, field: str, value: str | None) -> Response:
        """/profile set <field> <value>, or /profile clear <field> when value is None."""
        arg = f"clear {field}" if value is None else f"set {field} {value}"
        reply = await profile_command(
            self.engine.learner, user.id, arg, self.engine.state.now(), user.name
        )
        if not reply.ok:
            return error(400, reply.text)
        return JSONResponse({"message": reply.text})

    async def delete_entry(self, user: UserRef, kind: str, entry_id: int) -> Response:
        """A mistake or a word, with its review card (as /mistakes delete, /words delete)."""
        if not await self.engine.learner.entries.delete_entry(user.id, kind, entry_id):
            return error(404, f"no such {kind}")
        return JSONResponse({"deleted": entry_id})

    async def export(self, user: UserRef) -> Response:
        data = await self.engine.export.export_learner(user.id)
        return Response(
            json.dumps(data, ensure_ascii=False, indent=2),
            media_type="application/json",
            headers={"Content-Disposition": 'attachment; filename="memora-my-data.json"'},
        )

    async def forget_me(self, user: UserRef, confirmed: bool) -> Response:
        """Everything about the learner, as /forgetme deletes it (asked first by the page)."""
        if not confirmed:
            return error(400, 'send {"confirm": "forget me"} to confirm')
        async with self.engine.exclusive(user.id, user.id):  # their private chat's turns first
            counts = await self.engine.forget_user(user.id)
        return JSONResponse({"deleted": counts})

    async def usage(self, user: UserRef, days: int) -> Response:
        """The operator's page: the /usage table and tokens and cost per day."""
        ctx = CommandContext(ChatRef(user.id), user, str(days), is_admin=True)
        table = await run_command(self.engine, "usage", ctx)
        metering = self.engine.state.metering
        daily = await metering.daily(days, self.engine.state.now()) if metering else []
        currency = metering.pricing.currency if metering else ""
        return JSONResponse(
            {
                "table": table.text,
                "currency": currency,
                "days": [{"day": d.day, "tokens": d.tokens, "cost": d.cost} for d in daily],
            }
        )
