"""The memory_eval benchmark's plumbing, on the fake OpenAI server and a tiny LoCoMo-shaped file.

A benchmark's own check lives beside it (pytest collects benchmarks/test_*.py too): tests/ import
nothing from benchmarks/, and this harness does not rot between real-model runs.

The fake answers every kind of call the harness makes (extraction, replies, the judge) by rules
this test knows, so the printed figures can be checked exactly: which answers the judge calls
CORRECT, how many memories extraction stored, the input tokens the server billed.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import Any

import pytest

from benchmarks import memory_eval
from tests.support.fake_openai import FakeOpenAI, FakeRequest, input_tokens_of

# Two sessions between Ana and Ben. Each turn carries a FACT marker the fake extracts.
SESSIONS = {
    "speaker_a": "Ana Lopez",
    "speaker_b": "Ben",
    "session_1_date_time": "1:56 pm on 8 May, 2023",
    "session_1": [
        {"speaker": "Ana Lopez", "dia_id": "D1:1", "text": "Hi Ben! FACT-a1 I adopted a cat."},
        {"speaker": "Ben", "dia_id": "D1:2", "text": "Nice! FACT-b1 I run marathons."},
        {
            "speaker": "Ben",
            "dia_id": "D1:3",
            "text": "FACT-b2 I live in Oslo.",
            "blip_caption": "a fjord",
        },
        {"speaker": "Ana Lopez", "dia_id": "D1:4", "text": "FACT-a2 I teach chemistry."},
    ],
    "session_2_date_time": "10:00 am on 20 June, 2023",
    "session_2": [
        {"speaker": "Ben", "dia_id": "D2:1", "text": "FACT-b3 I bought a bike yesterday."},
        {"speaker": "Ana Lopez", "dia_id": "D2:2", "text": "FACT-a3 I paint on Sundays."},
    ],
    "session_3_date_time": "9:00 am on 1 July, 2023",
    "session_3": [{"speaker": "Ana Lopez", "dia_id": "D3:1", "text": "FACT-a4 not ingested"}],
}
# (category, question, gold): gold "ok-…" → the fake judge passes the engine's answer.
QA = [
    (4, "What pet did Ana adopt?", "ok-cat", ["D1:1"]),
    (4, "Where does Ben live?", "bad-oslo", ["D1:3"]),
    (2, "When did Ben buy a bike?", "ok-june", ["D2:1"]),
    (1, "What do Ana and Ben do?", "bad-both", ["D1:4", "D1:2"]),
    (3, "Would Ben enjoy hiking?", "ok-yes", ["D1:2"]),
    (5, "What did Ana say about dogs?", "ok-none", ["D1:1"]),  # adversarial: skipped
    (4, "What does Ana do later?", "ok-later", ["D3:1"]),  # outside --sessions 2: dropped
]


def _responder(req: FakeRequest) -> Any:
    text = req.last_user_message
    if req.kind == "structured" and req.schema_name == "Verdict":
        gold = re.search(r"Gold answer: (\S+)", text)
        engine_said = "Generated answer: ENGINE" in text
        ok = engine_said and gold is not None and gold.group(1).startswith("ok-")
        # The baseline is always right, so the two columns differ.
        label = "CORRECT" if ok or not engine_said else "WRONG"
        if "Would Ben enjoy hiking" in text and not engine_said:
            return f"Not JSON, but the verdict is clear: wrong... no, {label}"  # read leniently
        return {"reasoning": "fake", "label": label}
    if req.kind == "structured":  # extraction: one memory per FACT marker in the message
        message = text.split("<user_message>")[-1]
        facts = re.findall(r"FACT-\w+ I ([^.\n]*)", message)
        return {
            "memories": [{"text": f"The user fact: {f}.", "category": "personal"} for f in facts]
        }
    if any("The whole earlier conversation" in m["content"] for m in req.messages):
        return "BASELINE answer"
    return "ENGINE answer"


@pytest.fixture
def locomo(tmp_path: Path) -> Path:
    data = dict(SESSIONS)
    data["qa"] = [{"question": q, "answer": a, "evidence": ev, "category": c} for c, q, a, ev in QA]
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_figures_come_from_what_the_model_answered(
    locomo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "result.json"
    with FakeOpenAI() as server:
        server.responder = _responder
        code = memory_eval.main(
            [
                "--base-url", server.base_url,
                "--api-key", "sk-fake",
                "--model", "gpt-test",
                "--api", "chat_completions",
                "--embeddings", "openai",
                "--locomo", str(locomo),
                "--sessions", "2",
                "--json", str(out),
            ]
        )  # fmt: skip
        replies = server.requests_of("reply")
        structured = server.requests_of("structured")
    assert code == 0
    printed = capsys.readouterr().out
    result = json.loads(out.read_text(encoding="utf-8"))

    # Ingestion: Ana's runs are 3 messages (a1, a2, a3), Ben's 2 (b1+b2 merged, b3); the
    # session-3 fact is outside --sessions 2. Six facts → six memories.
    assert result["ingestion"]["exchanges"] == 5
    assert result["ingestion"]["memories"] == 6
    assert "5 exchanges -> 6 memories" in printed
    assert result["ingestion"]["failed"] == []
    # Each exchange was extracted at its session's date, Ana's first with Ben's answer beside it.
    extractions = [r.last_user_message for r in structured if r.schema_name != "Verdict"]
    dates = sorted(re.search(r"Message date: (\S+)", e).group(1) for e in extractions)  # type: ignore[union-attr]
    assert dates == ["2023-05-08"] * 3 + ["2023-06-20"] * 2
    first = next(e for e in extractions if "FACT-a1" in e.split("<user_message>")[-1])
    assert "FACT-b1 I run marathons. FACT-b2 I live in Oslo. [shares a photo: a fjord]" in first
    # Category 5 is skipped; the question about session 3 is dropped; one names both speakers.
    assert [r["index"] for r in result["records"]] == [0, 1, 2, 3, 4]
    assert result["skipped_adversarial"] == 1 and result["routed_by_default"] == 1
    assert [r["asker"] for r in result["records"]] == [
        "Ana Lopez",
        "Ben",
        "Ben",
        "Ana Lopez",
        "Ben",
    ]

    # The judge passed the engine on the three "ok-" golds, the baseline on all five.
    engine, full = result["summary"]["engine"], result["summary"]["full_context"]
    assert engine["per_category"]["single-hop"] == {"correct": 1, "total": 2, "accuracy": 0.5}
    assert engine["per_category"]["temporal"]["accuracy"] == 1.0
    assert engine["per_category"]["multi-hop"]["accuracy"] == 0.0
    assert engine["overall"] == {"correct": 3, "total": 5, "accuracy": 0.6}
    assert full["overall"] == {"correct": 5, "total": 5, "accuracy": 1.0}
    overall = next(line for line in printed.splitlines() if line.startswith("accuracy overall"))
    assert "0.600 (3/5)" in overall and "1.000 (5/5)" in overall
    single = next(line for line in printed.splitlines() if line.startswith("accuracy single-hop"))
    assert "0.500 (1/2)" in single

    # Actual input tokens are what the server billed, question by question, in order.
    billed = [input_tokens_of(r) for r in replies]
    assert len(billed) == 10  # one engine + one baseline call per question, nothing else
    records = result["records"]
    assert [r["engine"]["actual"] for r in records] == billed[0::2]
    assert [r["baseline"]["actual"] for r in records] == billed[1::2]
    assert engine["actual_median"] == statistics.median(billed[0::2])
    # The engine's context is its retrieved memories, the baseline's the whole transcript.
    # Each question sees only its asker's memories (here, the one fact it is about).
    asked = [str(r.messages) for r in replies[0::2]]
    for seen, fact in zip(asked, ["adopted a cat", "live in Oslo", "bought a bike"], strict=False):
        assert f"The user fact: {fact}" in seen
    ana, ben = ["adopted", "teach", "paint"], ["marathons", "Oslo", "bike"]
    for seen, record in zip(asked, records, strict=True):
        others = ben if record["asker"] == "Ana Lopez" else ana
        shown = " ".join(re.findall(r"- The user fact: ([^.]*)\.", seen))
        assert not any(w in shown for w in others)
        assert "The whole earlier conversation" not in seen
    assert all("FACT-b3 I bought a bike" in str(r.messages) for r in replies[1::2])
    assert full["actual_median"] > engine["actual_median"]
    for side in (engine, full):
        assert side["counted_median"] > 0
        assert 0 <= side["latency_median_ms"] <= side["latency_p95_ms"]
    assert re.search(r"latency p95 ms\s+\d+\s+\d+", printed)
    # Memories in the context: each asker's three fit the default memory_tokens budget, so all
    # three go in (their own only, as checked above); the baseline has none.
    assert [r["engine"]["memories"] for r in records] == [3, 3, 3, 3, 3]
    assert engine["memories_median"] == 3 and full["memories_median"] == 0
    # The judge's one answer outside the schema was read, and counted as a judge error.
    assert records[4]["baseline"]["label"] == "CORRECT" and records[4]["baseline"]["judge_error"]
    assert full["judge_errors"] == 1 and engine["judge_errors"] == 0
    assert re.search(r"input tokens engine/full\s+0\.\d{3}", printed)


def test_turns_keeps_the_first_turns_and_the_questions_they_answer(locomo: Path) -> None:
    (conv,) = memory_eval.load_data(locomo, None, None, 3)
    assert [len(turns) for _, turns in conv.sessions] == [3]
    assert [e.text for e in conv.exchanges("Ana Lopez")] == ["Hi Ben! FACT-a1 I adopted a cat."]
    # D1:1, D1:3 and D1:2 are in; D1:4 (a multi-hop half), D2:1 and D3:1 are not.
    assert [q.question for q in conv.questions] == [
        "What pet did Ana adopt?",
        "Where does Ben live?",
        "Would Ben enjoy hiking?",
    ]
