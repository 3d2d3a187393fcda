"""The extraction call itself: which memories it is shown, the call (asked again once when the
answer is unusable, in the compact form when the server's context is too small), its outcome."""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace

from memora.extraction.prompts import (
    FORMS,
    MAX_ASKS,
    MAX_BACKFILL,
    ExtractionInput,
    build_extraction_input,
    fixed_instructions,
)
from memora.extraction.reading import REFUSED, RETRY_PROMPT, read_answer
from memora.extraction.schema import (
    EXISTING_ID,
    ExtractionOutcome,
    ExtractionResult,
    Form,
    LearnerExtractionResult,
    ModeAsk,
    Rejection,
    listed_number,
)
from memora.extraction.screening import (
    masked_unusable,
    redact,
    screen_learner,
    screen_memories,
    screen_terms_for,
)
from memora.llm import (
    CONTEXT_EXCEEDED,
    LLM,
    CallInfo,
    ChatMessage,
    LLMError,
)
from memora.longterm.memories import (
    Memory,
)

log = logging.getLogger(__name__)


def needing_terms(
    memories: Sequence[Memory],
    limit: int = MAX_BACKFILL,
    unanswered: Mapping[str, int] | None = None,
) -> list[Memory]:
    """The memories to ask search terms for in this call: those without terms, then those with
    terms but no situations (stored before situations existed), each most recently written
    first (a /remember fact at the learner's next turn; older ones over time), except those
    asked about MAX_ASKS times already without an answer (`unanswered`: id → times)."""
    asked = unanswered or {}
    bare = [  # `memories` is oldest first
        m
        for m in reversed(memories)
        if not (m.terms and m.situations) and asked.get(m.id, 0) < MAX_ASKS
    ]
    newest = sorted(bare, key=lambda m: m.updated_at, reverse=True)  # stable on ties
    return sorted(newest, key=lambda m: bool(m.terms))[:limit]


async def extract(
    llm: LLM,
    turn: ExtractionInput,
    *,
    form: Form = "full",
    mode: ModeAsk | None = None,
    learner: str | None = None,
) -> ExtractionOutcome:
    """Ask the model what to remember from one user message. Never raises on a model failure.

    With `mode` (a lesson mode's turn, and the learner part asked for) the answer is the mode's
    wider schema, and the call is told what the turn was (see ModeAsk).

    With the turn's `profile_lines` (the learner model is on) the same call is asked for the
    wider :class:`LearnerExtractionResult`: profile fields, mistakes and vocabulary too. With
    its `needs_terms` (see :func:`needing_terms`) it is also asked for those memories' terms.

    A server that refuses the full form as longer than its context (`context_length_exceeded`,
    llama.cpp's answer at `--n_ctx 2048`), or whose context cuts an answer short (the seam says
    so with the same code: see ChatCompletionsLLM._parse), is asked again at once in the
    compact form, and the outcome's `form` says so: the caller keeps that form (Engine does,
    for the process), as the LLM seam keeps a structured-output form that worked. Learned, not
    configured: the server knows its context, its refusal is immediate (the prompt is only
    tokenised), and an operator need not know how many tokens the call takes with their
    model's tokenizer.

    `learner`: the learner's provider identifier, sent with the call (memora.llm.identity)."""
    mode = mode if turn.profile_lines is not None else None
    call = CallInfo("extraction", learner)
    outcome = await _extract_in(llm, turn, form, mode, call)
    if form == "full" and outcome.code == CONTEXT_EXCEEDED:
        log.warning("the extraction call is longer than the model's context: compact from now on")
        outcome = await _extract_in(llm, turn, "compact", mode, call)
    return outcome


async def _extract_in(
    llm: LLM, turn: ExtractionInput, form: Form, mode: ModeAsk | None, call: CallInfo
) -> ExtractionOutcome:
    """One extraction in one form (see `extract`), showing as many memories as it allows."""
    shape = FORMS[form]
    existing, needs_terms = turn.existing[: shape.existing], turn.needs_terms[: shape.needs_terms]
    content = build_extraction_input(
        replace(turn, existing=existing, needs_terms=needs_terms), form
    )
    schema: type[ExtractionResult] = ExtractionResult
    instructions = fixed_instructions(form, learner=turn.profile_lines is not None)  # first: cached
    if turn.profile_lines is not None:
        schema = LearnerExtractionResult
    if mode is not None:
        schema = mode.schema
        instructions += mode.instructions
        content += f"\n\n{mode.input}"
    messages = [ChatMessage("user", content)]
    if needs_terms:  # appended last: the instructions' start stays the same on every call
        instructions += shape.terms_for
    done = functools.partial(
        ExtractionOutcome, form=form, listed=len(existing), terms_listed=len(needs_terms)
    )
    try:
        answer = await llm.parse(instructions, messages, schema, call=call)
        result, problem = read_answer(answer, schema)
        raw, usage = answer.text, answer.usage
        if result is None and problem != REFUSED:
            # Broken JSON or the wrong shape: show the model its answer and the error, once.
            retry = [
                *messages,
                ChatMessage("assistant", answer.text),
                ChatMessage("user", RETRY_PROMPT.format(problem=problem)),
            ]
            try:
                again = await llm.parse(instructions, retry, schema, call=call)
            except LLMError as exc:  # the first answer and why it failed stay in the log
                return done(
                    raw=masked_unusable(raw),
                    usage=usage,
                    error=f"unusable answer: {problem}; asking again failed: {exc}",
                    code=exc.code,  # the ask again too long, or cut at the context's end
                )
            result, problem = read_answer(again, schema)
            raw = f"{answer.text}\n--- asked again ---\n{again.text}"
            usage = usage + again.usage
    except LLMError as exc:
        return done(error=f"the model call failed: {exc}", code=exc.code)
    except Exception as exc:  # a bug or an SDK surprise must not break the chat
        log.exception("memory extraction failed")
        return done(error=f"extraction failed: {type(exc).__name__}: {exc}")
    if result is None:
        return done(raw=masked_unusable(raw), usage=usage, error=f"unusable answer: {problem}")
    learner = result if isinstance(result, LearnerExtractionResult) else None
    accepted, rejected = screen_memories(result)
    asks_to_forget = bool(result.forget)
    named = {answer: listed_number(answer, EXISTING_ID, len(existing)) for answer in result.forget}
    forget = sorted({n for n in named.values() if n is not None})
    unknown_forget = [answer for answer, n in named.items() if n is None]
    if unknown_forget:  # another list's id, a bare number: never a guess at which memory
        log.warning("ignored forget ids %s: the call listed m1-m%d", unknown_forget, len(existing))
    if asks_to_forget:  # a request to forget is never itself a memory
        rejected += [(m.text, Rejection.FORGET_REQUEST) for m in accepted]
        accepted = []
    terms_for, unlisted, secret_terms = screen_terms_for(result, len(needs_terms))
    rejected += secret_terms
    if learner is not None:
        learner, more = screen_learner(learner)
        rejected += more
    secrets = [text for text, why in rejected if why is Rejection.SECRET]
    return done(
        raw=redact(raw, secrets),
        memories=accepted,
        rejected=rejected,
        usage=usage,
        learner=learner,
        terms_for=terms_for,
        unlisted=unlisted,
        forget=forget,
        unknown_forget=unknown_forget,
        asks_to_forget=asks_to_forget,
    )
