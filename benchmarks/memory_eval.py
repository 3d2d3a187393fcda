"""LoCoMo question answering end to end through the real engine, on any OpenAI-compatible model.

    .venv/bin/python -m benchmarks.memory_eval --base-url https://api.openai.com/v1 \\
        --model gpt-4.1-mini [--api responses|chat_completions] [--api-key KEY | $OPENAI_API_KEY] \\
        [--conversations 26,30] [--sessions N] [--limit N] [--judge-model M] [--json out.json]

What it measures (the method of the mem0 and Zep papers, on our engine):

1. **Ingestion.** Each LoCoMo conversation is between two people, and Memora's memory belongs
   to one learner talking with a tutor. So each conversation is taken in twice, once from each
   speaker's side (as mem0's LoCoMo evaluation does): for speaker X, each run of X's turns is a
   learner message, and the other speaker's answer that follows is the "assistant reply" beside
   it (context only: extraction never keeps what the assistant side said). The memories belong
   to X's user id; speaker A's and B's memories never mix, as two learners' never do. Each
   exchange goes through ``Engine.import_exchange``: stored as a turn of X's private chat, then
   the engine's own after-reply extraction runs on it, dated at its session's date (so "last
   week" resolves as it would have then). No tutor reply is generated (the real reply is the
   other speaker's) and the running summary is not folded (see 2: questions never see that
   chat), so ingestion costs **one extraction call (plus embeddings) per exchange**: 419 for
   conversation 26, 369 for 30 (788 calls of ~1.2k input tokens, ~1M in all, for both shipped
   files), run ``--concurrency`` at a time (each speaker's exchanges stay in order).
2. **Questions.** Categories 1–4 (multi-hop, temporal, open-domain, single-hop); category 5
   (adversarial, no gold answer) is counted and skipped. A question goes to the speaker it
   names (its first name in the question; speaker A when it names both or neither: the count is
   printed), as a new message in a new private chat of that user, through the real
   ``Engine.handle_turn`` (retrieval, context in budget, the one reply call): so what it measures
   is long-term memory alone, and each question is independent of the others. The message reads
   "(I am X; Y is the friend I talk with.) <question> Answer in a few words." because memories
   say "the user", not the speaker's name.
3. **Baseline, same run.** The whole conversation (every session with its date, "Name: text"
   lines) in one prompt, the same system prompt and the same question message, one call.
4. **Judge.** The same model (or ``--judge-model``) labels each answer CORRECT or WRONG against
   the gold answer with a short prompt and structured output (falling back to a plain answer
   for servers without structured output). Accuracy is printed per category for both, with input
   tokens per question (counted by our tokenizer and reported by the server) and answer latency
   (median, p95; the judge's time excluded). Questions are asked one at a time, so latency is
   not inflated by concurrency; ingestion runs ``--concurrency`` exchanges at once.

The data: ``benchmarks/data/locomo/*.json`` (two LoCoMo conversations, CC BY-NC 4.0, see its
README); ``--locomo`` takes another folder or file in the same shape. ``--sessions N`` keeps the
first N sessions and only the questions whose evidence lies in them (a cheaper honest slice);
``--turns N`` likewise keeps the first N turns (a slice a CPU-only local model can finish).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from memora.app import open_engine
from memora.config import Settings, load_settings
from memora.engine import ChatRef, Engine, UserRef
from memora.llm import LLM, ChatMessage, LLMError, OpenAILLM

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT / "benchmarks" / "data" / "locomo"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
ADVERSARIAL = 5

ASK = "(I am {me}; {other} is the friend I talk with.) {question} Answer in a few words."
BASELINE_BLOCK = "The whole earlier conversation between {a} and {b}, session by session:\n\n"

JUDGE_INSTRUCTIONS = """\
You grade answers to questions about a long conversation. You get the question, the gold \
(correct) answer and a generated answer. Label the generated answer CORRECT if it states the \
same thing as the gold answer: be generous with wording, length and extra detail, and with \
dates in another format or relative wording that points to the same date or period. Label it \
WRONG if it contradicts the gold answer, misses its point, or says it does not know."""


class Verdict(BaseModel):
    """The judge's structured answer."""

    reasoning: str = Field(description="One short sentence on why.")
    label: Literal["CORRECT", "WRONG"]


# -- the data ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Exchange:
    """One learner message and the other speaker's answer, from one speaker's side."""

    text: str
    reply: str
    at: datetime


@dataclass(frozen=True)
class Question:
    conversation: str
    index: int
    category: int
    question: str
    answer: str
    asker: str  # the speaker whose memory answers it


@dataclass
class Conversation:
    name: str
    speakers: tuple[str, str]
    sessions: list[tuple[datetime, list[dict[str, Any]]]]
    questions: list[Question]
    skipped_adversarial: int = 0
    routed_by_default: int = 0

    def exchanges(self, speaker: str) -> list[Exchange]:
        """Runs of `speaker`'s turns as messages, each with the other speaker's following run."""
        out: list[Exchange] = []
        for at, turns in self.sessions:
            runs: list[tuple[str, str]] = []
            for turn in turns:
                line = _turn_text(turn)
                if runs and runs[-1][0] == turn["speaker"]:
                    runs[-1] = (turn["speaker"], runs[-1][1] + "\n" + line)
                else:
                    runs.append((turn["speaker"], line))
            for i, (who, text) in enumerate(runs):
                if who == speaker:
                    reply = runs[i + 1][1] if i + 1 < len(runs) else ""
                    out.append(Exchange(text, reply, at))
        return out

    def transcript(self) -> str:
        a, b = self.speakers
        lines = [BASELINE_BLOCK.format(a=a, b=b)]
        for at, turns in self.sessions:
            lines.append(f"[{at:%Y-%m-%d %H:%M}]")
            lines += [f"{t['speaker']}: {_turn_text(t)}" for t in turns]
            lines.append("")
        return "\n".join(lines).strip()


def _turn_text(turn: dict[str, Any]) -> str:
    text = str(turn.get("text", ""))
    caption = turn.get("blip_caption")
    return f"{text} [shares a photo: {caption}]" if caption else text


def _session_date(raw: str) -> datetime:
    """LoCoMo writes "1:56 pm on 8 May, 2023"."""
    return datetime.strptime(raw.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def _evidence_sessions(evidence: Sequence[str]) -> set[int]:
    found = {int(m.group(1)) for e in evidence if (m := re.match(r"D(\d+):", str(e)))}
    return found


def load_conversation(
    path: Path, max_sessions: int | None, max_turns: int | None = None
) -> Conversation:
    data = json.loads(path.read_text(encoding="utf-8"))
    conv = data.get("conversation", data)
    speakers = (str(conv["speaker_a"]), str(conv["speaker_b"]))
    numbers = sorted(
        int(m.group(1))
        for k, v in conv.items()
        if (m := re.fullmatch(r"session_(\d+)", k)) and isinstance(v, list) and v
    )
    if max_sessions is not None:
        numbers = numbers[:max_sessions]
    sessions = [
        (_session_date(conv[f"session_{n}_date_time"]), conv[f"session_{n}"]) for n in numbers
    ]
    if max_turns is not None:
        sessions = _first_turns(sessions, max_turns)
    turn_ids = {str(t.get("dia_id")) for _, turns in sessions for t in turns}
    result = Conversation(path.stem, speakers, sessions, [])
    kept = set(numbers)
    for i, qa in enumerate(data["qa"]):
        category = int(qa["category"])
        evidence = [str(e) for e in qa.get("evidence", [])]
        if not _evidence_sessions(evidence) <= kept:
            continue
        if max_turns is not None and not set(evidence) <= turn_ids:
            continue
        if category == ADVERSARIAL or category not in CATEGORIES:
            result.skipped_adversarial += 1
            continue
        asker = _asker(str(qa["question"]), speakers)
        if asker is None:
            result.routed_by_default += 1
        result.questions.append(
            Question(
                path.stem, i, category, str(qa["question"]), str(qa["answer"]), asker or speakers[0]
            )
        )
    return result


def _first_turns(
    sessions: list[tuple[datetime, list[dict[str, Any]]]], n: int
) -> list[tuple[datetime, list[dict[str, Any]]]]:
    """The first `n` turns of the conversation, sessions cut where they run out."""
    out = []
    for at, turns in sessions:
        if n <= 0:
            break
        out.append((at, turns[:n]))
        n -= len(turns[:n])
    return out


def _asker(question: str, speakers: tuple[str, str]) -> str | None:
    """The one speaker the question names (by first name), None when it names both or neither."""
    named = [s for s in speakers if re.search(rf"\b{re.escape(s.split()[0])}\b", question)]
    return named[0] if len(named) == 1 else None


def load_data(
    source: Path, names: list[str] | None, max_sessions: int | None, max_turns: int | None = None
) -> list[Conversation]:
    files = sorted(source.glob("*.json")) if source.is_dir() else [source]
    if names:
        files = [f for f in files if f.stem in names]
        missing = set(names) - {f.stem for f in files}
        if missing:
            raise SystemExit(f"no such conversation in {source}: {', '.join(sorted(missing))}")
    return [load_conversation(f, max_sessions, max_turns) for f in files]


# -- ids -------------------------------------------------------------------------------------------
def user_id(conv_no: int, speaker_no: int) -> int:
    return 1_000 * (conv_no + 1) + speaker_no + 1


def question_chat(conv_no: int, q_no: int) -> int:
    return 10_000_000 + 100_000 * conv_no + q_no


# -- results ---------------------------------------------------------------------------------------
@dataclass
class Answer:
    text: str
    ok: bool
    counted: int
    actual: int
    seconds: float
    memories: int = 0  # memories the engine put in the context (0 for the baseline)
    label: str = "WRONG"
    judge_error: str = ""


@dataclass
class Record:
    conversation: str
    index: int
    category: int
    question: str
    gold: str
    asker: str
    engine: Answer
    baseline: Answer | None = None


@dataclass
class Ingested:
    exchanges: int = 0
    memories: int = 0
    tokens: int = 0
    seconds: float = 0.0
    failed: list[str] = field(default_factory=list)  # one line per failed extraction


# -- the run ---------------------------------------------------------------------------------------
async def ingest(engine: Engine, convs: list[Conversation], concurrency: int) -> Ingested:
    out = Ingested()
    gate = asyncio.Semaphore(concurrency)

    async def one_side(c_no: int, conv: Conversation, s_no: int) -> None:
        speaker = conv.speakers[s_no]
        user = UserRef(user_id(c_no, s_no), speaker)
        chat = ChatRef(user.id)
        for ex in conv.exchanges(speaker):  # in order: later facts update earlier ones
            async with gate:
                await engine.import_exchange(chat, user, ex.text, ex.reply, at=ex.at)
                # This speaker's exchanges run one at a time: the last log is this one's.
                log = await engine.queries.extraction_log(user.id)
            out.exchanges += 1
            if log is not None and log.status.startswith("failed"):
                out.failed.append(f"{speaker} @ {ex.at:%Y-%m-%d}: {log.detail}")
        out.memories += len(await engine.queries.memories(user.id))
        out.tokens += (await engine.db.turns.total_usage(chat.id)).total

    start = time.perf_counter()
    await asyncio.gather(*(one_side(c, conv, s) for c, conv in enumerate(convs) for s in (0, 1)))
    out.seconds = time.perf_counter() - start
    return out


async def ask_engine(engine: Engine, chat: ChatRef, user: UserRef, message: str) -> Answer:
    start = time.perf_counter()
    reply = await engine.handle_turn(chat, user, message, extract=False)
    seconds = time.perf_counter() - start
    usage = reply.stats.usage if reply.stats is not None else None
    return Answer(
        reply.text,
        reply.ok,
        usage.counted_input if usage else 0,
        usage.actual_input if usage else 0,
        seconds,
        usage.memories_used if usage else 0,
    )


async def ask_baseline(engine: Engine, transcript: str, message: str) -> Answer:
    instructions = engine.state.config.instructions
    messages = [ChatMessage("user", transcript), ChatMessage("user", message)]
    counted = await engine.counter.count(instructions, messages)
    start = time.perf_counter()
    try:
        done = await engine.turns.llm.complete(instructions, messages)
    except LLMError as exc:
        return Answer(f"(failed: {exc})", False, counted, 0, time.perf_counter() - start)
    return Answer(done.text, True, counted, done.usage.input_tokens, time.perf_counter() - start)


async def judge(llm: LLM, q: Question, answer: Answer) -> None:
    """Label the answer in place; a failed answer is WRONG without asking."""
    if not answer.ok:
        answer.label, answer.judge_error = "WRONG", "no answer"
        return
    prompt = f"Question: {q.question}\nGold answer: {q.answer}\nGenerated answer: {answer.text}"
    messages = [ChatMessage("user", prompt)]
    try:
        parsed = await llm.parse(JUDGE_INSTRUCTIONS, messages, Verdict)
        if parsed.parsed is not None:
            answer.label = parsed.parsed.label
            return
        answer.judge_error = f"structured: {parsed.problem or 'no verdict'}"
        label = _label_in(parsed.text)
        if label is not None:  # a verdict outside the schema still says which
            answer.label = label
            return
    except LLMError as exc:  # the server failed: ask once more for one plain word
        answer.judge_error = f"structured: {exc}"
    try:
        plain = await llm.complete(
            JUDGE_INSTRUCTIONS + "\nAnswer with one word: CORRECT or WRONG.", messages
        )
    except LLMError as exc:
        answer.judge_error += f"; plain: {exc}"
        return
    answer.label = _label_in(plain.text) or "WRONG"


def _label_in(text: str) -> str | None:
    """The last CORRECT/WRONG in a text: the label comes after any reasoning."""
    words = re.findall(r"\b(CORRECT|WRONG)\b", text.upper())
    return words[-1] if words else None


def engine_settings(args: argparse.Namespace, data_dir: Path) -> Settings:
    """The memora settings (`--config`, else the defaults and the environment) with the model
    of the command line and a data folder of the run's own (also used by local_server.py)."""
    settings = load_settings(args.config)
    llm_cfg = settings.llm.model_copy(
        update={
            "base_url": args.base_url or settings.llm.base_url,
            "api_key": args.api_key or settings.llm.api_key or "not-needed",
            "model": args.model or settings.llm.model,
            "api": args.api or settings.llm.api,
            "max_output_tokens": args.max_output_tokens or settings.llm.max_output_tokens,
        }
    )
    update: dict[str, Any] = {
        "llm": llm_cfg,
        "storage": settings.storage.model_copy(update={"data_dir": data_dir}),
    }
    if args.embeddings:
        update["embeddings"] = settings.embeddings.model_copy(update={"provider": args.embeddings})
    return settings.model_copy(update=update)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    convs = load_data(args.locomo, args.conversations, args.sessions, args.turns)
    with tempfile.TemporaryDirectory(prefix="memora-eval-") as tmp:
        settings = engine_settings(args, Path(tmp))
        llm_cfg = settings.llm
        judge_llm = OpenAILLM.for_api(
            llm_cfg.api,
            model=args.judge_model or llm_cfg.model,
            api_key=llm_cfg.api_key,
            base_url=llm_cfg.base_url,
            timeout=llm_cfg.timeout,
            max_retries=llm_cfg.max_retries,
            max_output_tokens=llm_cfg.max_output_tokens or None,
        )
        try:
            async with open_engine(settings) as engine:
                ingested = await ingest(engine, convs, args.concurrency)
                records = await ask_all(engine, judge_llm, convs, args)
        finally:
            await judge_llm.aclose()
    return {
        "model": llm_cfg.model,
        "api": llm_cfg.api,
        "judge_model": args.judge_model or llm_cfg.model,
        "conversations": [c.name for c in convs],
        "skipped_adversarial": sum(c.skipped_adversarial for c in convs),
        "routed_by_default": sum(c.routed_by_default for c in convs),
        "ingestion": asdict(ingested),
        "records": [asdict(r) for r in records],
        "summary": summarise(records),
    }


async def ask_all(
    engine: Engine, judge_llm: LLM, convs: list[Conversation], args: argparse.Namespace
) -> list[Record]:
    records: list[Record] = []
    for c_no, conv in enumerate(convs):
        transcript = conv.transcript()
        questions = conv.questions[: args.limit] if args.limit else conv.questions
        for q_no, q in enumerate(questions):
            s_no = conv.speakers.index(q.asker)
            other = conv.speakers[1 - s_no]
            message = ASK.format(me=q.asker, other=other, question=q.question)
            user = UserRef(user_id(c_no, s_no), q.asker)
            mine = await ask_engine(engine, ChatRef(question_chat(c_no, q_no)), user, message)
            await judge(judge_llm, q, mine)
            record = Record(conv.name, q.index, q.category, q.question, q.answer, q.asker, mine)
            if not args.no_baseline:
                record.baseline = await ask_baseline(engine, transcript, message)
                await judge(judge_llm, q, record.baseline)
            records.append(record)
    await engine.drain()
    return records


# -- figures ---------------------------------------------------------------------------------------
def p95(values: Sequence[float]) -> float:
    """Nearest-rank 95th percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def _side(answers: list[tuple[int, Answer]]) -> dict[str, Any]:
    per: dict[str, Any] = {}
    for cat, name in CATEGORIES.items():
        mine = [a for c, a in answers if c == cat]
        if mine:
            right = sum(a.label == "CORRECT" for a in mine)
            per[name] = {"correct": right, "total": len(mine), "accuracy": right / len(mine)}
    all_ = [a for _, a in answers]
    right = sum(a.label == "CORRECT" for a in all_)
    return {
        "per_category": per,
        "overall": {"correct": right, "total": len(all_), "accuracy": right / len(all_)},
        "failed_answers": sum(not a.ok for a in all_),
        "judge_errors": sum(bool(a.judge_error) and a.ok for a in all_),
        "memories_median": statistics.median(a.memories for a in all_),
        "counted_median": statistics.median(a.counted for a in all_),
        "actual_median": statistics.median(a.actual for a in all_),
        "actual_mean": statistics.fmean(a.actual for a in all_),
        "latency_median_ms": statistics.median(a.seconds for a in all_) * 1000,
        "latency_p95_ms": p95([a.seconds for a in all_]) * 1000,
    }


def summarise(records: list[Record]) -> dict[str, Any]:
    if not records:
        return {}
    out = {"engine": _side([(r.category, r.engine) for r in records])}
    baseline = [(r.category, r.baseline) for r in records if r.baseline is not None]
    if baseline:
        out["full_context"] = _side(baseline)
    return out


def _acc(cell: dict[str, Any] | None) -> str:
    if not cell:
        return "—"
    return f"{cell['accuracy']:.3f} ({cell['correct']}/{cell['total']})"


def render(result: dict[str, Any]) -> str:
    ing = result["ingestion"]
    lines = [
        f"# memory_eval: model={result['model']} api={result['api']} "
        f"judge={result['judge_model']} conversations={','.join(result['conversations'])}",
        f"ingestion: {ing['exchanges']} exchanges -> {ing['memories']} memories, "
        f"{ing['tokens']} tokens, {ing['seconds']:.1f} s"
        + (f"; extraction failed on {len(ing['failed'])}" if ing["failed"] else ""),
        f"questions: {len(result['records'])} (category 5 skipped: "
        f"{result['skipped_adversarial']}; asked as speaker A for naming both/neither: "
        f"{result['routed_by_default']})",
    ]
    summary = result["summary"]
    if not summary:
        return "\n".join([*lines, "no questions asked"])
    sides = [("engine", "engine (memory)"), ("full_context", "full context")]
    sides = [(k, t) for k, t in sides if k in summary]
    head = f"{'':28}" + "".join(f"{t:>24}" for _, t in sides)
    lines += ["", head]
    for name in [*CATEGORIES.values(), "overall"]:
        cells = [
            summary[k]["overall"] if name == "overall" else summary[k]["per_category"].get(name)
            for k, _ in sides
        ]
        if any(cells):
            label = f"accuracy {name}"
            lines.append(f"{label:28}" + "".join(f"{_acc(c):>24}" for c in cells))
    rows = [
        ("input tokens/q counted med", "counted_median", "{:.0f}"),
        ("input tokens/q actual med", "actual_median", "{:.0f}"),
        ("input tokens/q actual mean", "actual_mean", "{:.1f}"),
        ("memories in context med", "memories_median", "{:.0f}"),
        ("latency median ms", "latency_median_ms", "{:.0f}"),
        ("latency p95 ms", "latency_p95_ms", "{:.0f}"),
        ("failed answers", "failed_answers", "{}"),
        ("judge errors", "judge_errors", "{}"),
    ]
    for label, key, fmt in rows:
        lines.append(
            f"{label:28}" + "".join(f"{fmt.format(summary[k][key]):>24}" for k, _ in sides)
        )
    if "full_context" in summary:
        ratio = summary["engine"]["actual_mean"] / max(summary["full_context"]["actual_mean"], 1)
        lines.append(f"{'input tokens engine/full':28}{ratio:>24.3f}")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--base-url", help="OpenAI-compatible endpoint (default: config / env)")
    p.add_argument("--api-key", help="default: $OPENAI_API_KEY or the config file")
    p.add_argument("--model", help="model for replies and extraction (default: config)")
    p.add_argument("--judge-model", help="model for the judge (default: --model)")
    p.add_argument("--api", choices=["responses", "chat_completions"])
    p.add_argument("--config", help="a memora TOML config for the engine's other settings")
    p.add_argument("--max-output-tokens", type=int, help="cap every answer ([llm] key)")
    p.add_argument("--embeddings", choices=["local", "openai"], help="default: config (local)")
    p.add_argument("--locomo", type=Path, default=DEFAULT_DATA, help="folder or file")
    p.add_argument(
        "--conversations",
        type=lambda s: [x.strip() for x in s.split(",") if x.strip()],
        help="comma-separated file stems, e.g. 26,30 (default: all)",
    )
    p.add_argument("--sessions", type=int, help="ingest only the first N sessions")
    p.add_argument(
        "--turns",
        type=int,
        help="ingest only the first N turns (and ask only questions whose evidence is in them)",
    )
    p.add_argument("--limit", type=int, help="at most N questions per conversation")
    p.add_argument("--concurrency", type=int, default=4, help="exchanges ingested at once")
    p.add_argument("--no-baseline", action="store_true", help="skip the full-context baseline")
    p.add_argument("--json", type=Path, help="also write every answer and figure here")
    args = p.parse_args(argv)
    if args.api_key is None:
        args.api_key = os.environ.get("OPENAI_API_KEY")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    result = asyncio.run(run(args))
    print(render(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
