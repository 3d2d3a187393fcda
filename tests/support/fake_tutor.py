"""A responder for the fake OpenAI server that plays the tutor in lesson modes the way a capable
model would: reply calls follow the lesson block (memora.shortterm.instructions.MODE_BLOCK) — a
placement question at the level the block names, the estimate after the last — and extraction calls
answer the mode's fields (placement judgement, a role-play scene's `scene_over`, a practice
`grade`). A learner's answer counts as right when it contains RIGHT_WORD, or, for a practice
exercise, the expected answer. Outside lessons its extraction logs the slips it knows (SLIPS) and
the word a learner asks about ("What does 'X' mean?"), so practice has items. Anything else:
default_responder.
"""

from __future__ import annotations

import re
from typing import Any

from memora.shortterm.instructions import MODE_BLOCK
from tests.support.fake_openai import Answer, FakeRequest, default_responder, minimal_instance

RIGHT_WORD = "right"
ESTIMATE = "B2"
_FIRST = re.compile(r"Ask question (\d+) of (\d+): a (.+?) question at ([A-C][12])")
_NEXT = re.compile(
    r"Then ask question (\d+) of (\d+): a (.+?) question at ([A-C][12]) if the answer was right, "
    r"at ([A-C][12]) if it was wrong"
)
_USER_MESSAGE = re.compile(r"<user_message>\n(.*?)\n</user_message>", re.DOTALL)
_ENDINGS = ("bye", "end", "thank you")
_EXPECTED = re.compile(r"Expected answer: <answer>(.+?)</answer>")
_PRACTICE_EXPECTED = re.compile(r"<practice>.*?Expected answer: (.+?)\n</practice>", re.DOTALL)
_ASKS_WORD = re.compile(r"what does [\"'‘“]?([a-z][a-z -]*?)[\"'’”]? mean", re.IGNORECASE)
SLIPS = {  # a learner's words with an error → (corrected, category, reason)
    "I goed to the park": ("I went to the park", "tense", "go → went: an irregular past"),
}


def is_right(text: str, expected: str | None = None) -> bool:
    if expected and _norm(expected) in _norm(text):
        return True
    return RIGHT_WORD in text.lower()


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s']", " ", text.lower()).split())


def mode_block(req: FakeRequest) -> str | None:
    """The lesson block of a reply request, or None when the chat is in no mode."""
    texts = [req.instructions or "", *(m["content"] for m in req.messages)]
    return next((t for t in texts if t.startswith(MODE_BLOCK)), None)


def tutor_reply(block: str, learner: str) -> str:
    """What a capable tutor says for this lesson block and learner message."""
    if found := _FIRST.search(block):
        n, _total, kind, level = found.groups()
        return f"Question {n}: ({kind}, {level}) Which word is right here: 'She ___ to school'?"
    if found := _NEXT.search(block):
        n, _total, kind, up, down = found.groups()
        verdict, level = ("Correct.", up) if is_right(learner) else ("Not quite.", down)
        return f"{verdict}\nQuestion {n}: ({kind}, {level}) Which word is right here?"
    if "Ask no more questions" in block:
        return f"Your estimated level is {ESTIMATE} because you handled most questions well."
    if found := _EXPECTED.search(block):
        expected = found.group(1)
        return "Well done!" if is_right(learner, expected) else f"Not quite: “{expected}”."
    return f"(in the lesson) {learner}"


def _resolved(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """`schema` with a `$ref` (or a nullable anyOf) followed to the object it names."""
    if "$ref" in schema:
        target: Any = root
        for part in str(schema["$ref"]).removeprefix("#/").split("/"):
            target = target[part]
        return _resolved(target, root)
    for option in schema.get("anyOf", []):
        if option.get("type") != "null":
            return _resolved(option, root)
    return schema


def _grade(schema: dict[str, Any], right: bool) -> Any:
    """A grade for a right / wrong answer, whatever type the schema gives it."""
    if schema.get("enum"):
        values = list(schema["enum"])
        return values[-1] if right else values[0]
    typ = schema.get("type")
    if typ == "boolean":
        return right
    if typ in ("integer", "number"):
        return schema.get("maximum", 4) if right else schema.get("minimum", 1)
    return "good" if right else "again"


def _fill(obj: Any, schema: dict[str, Any], root: dict[str, Any], text: str, last: bool) -> None:
    """Answer the mode fields found anywhere in `obj` (a minimal instance of `schema`)."""
    if not isinstance(obj, dict):
        return
    props: dict[str, Any] = schema.get("properties", {})
    learner = found.group(1) if (found := _USER_MESSAGE.search(text)) else text
    expected = found.group(1) if (found := _PRACTICE_EXPECTED.search(text)) else None
    right = is_right(learner, expected)
    for name, sub in props.items():
        sub = _resolved(sub, root)
        if name == "placement":
            obj[name] = {**(minimal_instance(sub, root) or {}), "answer_correct": right}
            if last:
                obj[name].update(estimate=ESTIMATE, reason="Most answers were right.")
        elif name == "answer_correct":
            obj[name] = right
        elif name == "scene_over":
            obj[name] = any(word in learner.lower() for word in _ENDINGS)
        elif name == "grade":
            obj[name] = _grade(sub, right)
        elif name == "mistakes" and expected is None:
            obj[name] = [
                {"original": wrong, "corrected": fixed, "category": kind, "reason": why}
                for wrong, (fixed, kind, why) in SLIPS.items()
                if wrong.lower() in learner.lower()
            ]
        elif name == "vocabulary" and (asked := _ASKS_WORD.search(learner)):
            term = asked.group(1).strip().lower()
            example = f"We planned the {term} together."
            obj[name] = [{"term": term, "meaning": f"({term})", "example": example}]
        elif sub.get("type") == "object" or "properties" in sub:
            if obj.get(name) is None:
                obj[name] = minimal_instance(sub, root)
            _fill(obj[name], sub, root, text, last)


def tutor_responder(req: FakeRequest) -> Answer:
    """Plays the tutor: see the module docstring."""
    if req.kind == "reply":
        block = mode_block(req)
        if block is None:
            return default_responder(req)
        return tutor_reply(block, req.last_user_message)
    if req.kind == "structured" and req.schema:
        answer: dict[str, Any] = minimal_instance(req.schema)
        text = req.last_user_message
        _fill(answer, req.schema, req.schema, text, "it was the last question" in text)
        return answer
    return default_responder(req)
