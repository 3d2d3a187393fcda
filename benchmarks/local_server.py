"""A scripted learner conversation through the real engine against any OpenAI-compatible server.

    .venv/bin/python -m benchmarks.local_server --base-url http://127.0.0.1:8011/v1 \\
        --model smollm2 [--api chat_completions|responses] [--stream] [--config memora.toml] \\
        [--embeddings local|openai] [--json out.json]

Made to try a local model server (llama.cpp's, Ollama, vLLM) before pointing the bot at it: the
plumbing, not the model's quality. Eight learner messages (Chinese mixed with English, with
facts to keep: level B1, TOEIC 850, lives in Taipei, a software engineer, a recurring mistake)
go through `Engine.handle_turn` (retrieval, budget, the one reply call; streamed with
`--stream`), then the after-reply work (summary fold, extraction) is waited for. Each turn
prints: whether the reply came, its latency, the input tokens counted locally and those the
server reported with the learned counted→billed factor, the structured-output form the
extraction client uses now (json_schema → json_object → instructions, see memora/llm.py), the
extraction call's form (full, or compact once the server's context refused it), the
extraction's status as `/extraction` shows it, the memories kept and any summary error. The
last turn asks the model for the facts back; the run ends with the memories, the profile and
the summary, so a silent loss shows. Everything runs in a temporary data folder.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks.memory_eval import engine_settings
from memora.app import open_engine
from memora.engine import ChatRef, Engine, UserRef

LEARNER = UserRef(7001, "Mei")
CHAT = ChatRef(7001)

SCRIPT: tuple[str, ...] = (
    "你好！我叫 Mei，住在台北 (I live in Taipei)，是一個 software engineer。",
    "我的英文程度大概是 B1，上個月考 TOEIC 拿了 850 分。",
    "I want to reach TOEIC 900 before June, 因為公司升遷需要。",
    "I always confuse 'since' and 'for'，例如 I live here since 2019. 這樣對嗎？",
    "我喜歡看 Netflix 的 crime shows 學英文，especially British ones.",
    "Yesterday I go to the office by MRT and my boss say my email was too informal.",
    "可以幫我改這封 email 嗎？'Hi boss, I cannot come tomorrow, sorry.'",
    "Do you remember my TOEIC score, my level and where I live?",
)


@dataclass
class TurnFigures:
    """What one turn showed (one printed row)."""

    turn: int
    ok: bool
    seconds: float
    counted: int
    actual: int
    factor: float
    structured: str
    form: str  # the extraction call's form: "compact" once the server's context refused "full"
    extraction: str
    memories: int
    updates: int  # on_delta calls (0 without --stream, or from a server that cannot stream)
    summary_error: str
    reply: str


async def one_turn(engine: Engine, n: int, text: str, stream: bool) -> TurnFigures:
    """Send one message, wait for its after-reply work, and read back what the learner sees."""
    pieces: list[str] = []

    async def on_delta(so_far: str) -> None:
        pieces.append(so_far)

    start = time.perf_counter()
    reply = await engine.handle_turn(CHAT, LEARNER, text, on_delta=on_delta if stream else None)
    seconds = time.perf_counter() - start
    await engine.drain()
    usage = reply.stats.usage if reply.stats is not None else None
    log = await engine.queries.extraction_log(LEARNER.id)
    status = await engine.queries.status(CHAT.id, LEARNER.id)
    extraction = "none yet" if log is None else f"{log.status}: {log.detail}".strip()
    return TurnFigures(
        turn=n,
        ok=reply.ok,
        seconds=seconds,
        counted=usage.counted_input if usage else 0,
        actual=usage.actual_input if usage else 0,
        factor=_factor(engine),
        structured=getattr(engine.after_reply.extraction.llm, "structured_mode", "?"),
        form=engine.after_reply.extraction.form,
        extraction=extraction,
        memories=len(await engine.queries.memories(LEARNER.id)),
        updates=len(pieces),
        summary_error=status.summary_error or "",
        reply=reply.text,
    )


def _factor(engine: Engine) -> float:
    calibration = getattr(engine.counter, "calibration", None)
    return float(getattr(calibration, "factor", 1.0))


def render_turn(f: TurnFigures) -> str:
    ok = "ok " if f.ok else "ERR"
    # A server that streams without usage (llama.cpp's) reports no billed count: not a 0.
    billed = f"{f.actual:5d}" if f.actual else "not reported"
    head = (
        f"turn {f.turn}: reply {ok} {f.seconds * 1000:6.0f} ms | input counted {f.counted:5d} "
        f"billed {billed} factor {f.factor:.3f} | structured={f.structured} | "
        f"extraction form {f.form} | memories {f.memories}"
    )
    streamed = f" (streamed in {f.updates} updates)" if f.updates else ""
    lines = [head, f"    reply{streamed}: {_one_line(f.reply, 160)}"]
    lines.append(f"    extraction: {_one_line(f.extraction, 400)}")
    if f.summary_error:
        lines.append(f"    summary error: {_one_line(f.summary_error, 200)}")
    return "\n".join(lines)


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="memora-local-") as tmp:
        settings = engine_settings(args, Path(tmp))
        async with open_engine(settings) as engine:
            turns = []
            for n, text in enumerate(SCRIPT[: args.turns], start=1):
                figures = await one_turn(engine, n, text, args.stream)
                print(render_turn(figures), flush=True)
                turns.append(figures)
            memories = [m.text for m in await engine.queries.memories(LEARNER.id)]
            summary = (await engine.queries.chat_state(CHAT.id)).summary
            profile = await engine.learner.context_lines(LEARNER.id, engine.state.now())
    return {
        "base_url": settings.llm.base_url,
        "model": settings.llm.model,
        "api": settings.llm.api,
        "turns": [asdict(t) for t in turns],
        "memories": memories,
        "summary": summary,
        "profile": profile,
    }


def render_end(result: dict[str, Any]) -> str:
    turns = result["turns"]
    failed = sum("failed" in t["extraction"] for t in turns)
    lines = [
        f"# {result['model']} at {result['base_url']} ({result['api']}): "
        f"{sum(t['ok'] for t in turns)}/{len(turns)} replies, extraction failed on {failed}, "
        f"{len(result['memories'])} memories, final factor {turns[-1]['factor']:.3f}"
        if turns
        else "# no turns",
        "memories:",
        *(f"  - {m}" for m in result["memories"]),
        "profile:",
        *(f"  {line}" for line in result["profile"]),
        f"summary: {_one_line(result['summary'] or '(none)', 600)}",
    ]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--base-url", help="OpenAI-compatible endpoint (default: config / env)")
    p.add_argument("--api-key", help="default: $OPENAI_API_KEY, the config, or 'not-needed'")
    p.add_argument("--model", help="model for replies and extraction (default: config)")
    p.add_argument("--api", choices=["responses", "chat_completions"], default="chat_completions")
    p.add_argument("--config", help="a memora TOML config for the engine's other settings")
    p.add_argument("--max-output-tokens", type=int, help="cap every answer ([llm] key)")
    p.add_argument("--embeddings", choices=["local", "openai"], help="default: config (local)")
    p.add_argument("--stream", action="store_true", help="stream the replies (on_delta)")
    p.add_argument("--turns", type=int, default=len(SCRIPT), help="the first N messages only")
    p.add_argument("--json", type=Path, help="also write every figure here")
    args = p.parse_args(argv)
    if args.api_key is None:
        args.api_key = os.environ.get("OPENAI_API_KEY")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    result = asyncio.run(run(args))
    print(render_end(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
