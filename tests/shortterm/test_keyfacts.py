"""Key facts survive summaries: found in mixed text, pinned when dropped, bounded."""

from __future__ import annotations

from memora.shortterm.keyfacts import MAX_PINS, PINNED_HEADER, key_facts, pin_missing, pinned_quotes


def test_finds_levels_scores_dates_durations_and_names() -> None:
    facts = key_facts("我的英文程度是 B1，目標是三個月後考多益 850 分，考試日期 2026-03-01")
    assert {"B1", "三個月", "多益", "850", "2026-03-01"} <= set(facts)
    en = key_facts("I have three months before the IELTS and need 6.5; my tutor is Lucy Chen.")
    assert {"three months", "IELTS", "6.5", "Lucy Chen"} <= set(en)


def test_nothing_pinned_when_the_summary_kept_everything() -> None:
    summary, lost = pin_missing("Learner is B1, aims for TOEIC 850.", ["I'm B1, TOEIC 850 please"])
    assert lost == [] and PINNED_HEADER not in summary


def test_dropped_facts_are_quoted_and_carried_to_the_next_fold() -> None:
    first, lost = pin_missing("Learner wants an exam.", ["My level is B1 and my goal is 850."])
    assert set(lost) == {"B1", "850"}
    assert pinned_quotes(first) == ["My level is B1 and my goal is 850."]
    # The next fold's model output drops the pins again: they are carried.
    second, _ = pin_missing("Learner likes travel English.", ["I like travel"], first)
    assert "B1" in second and "850" in second
    # Once the model writes the facts itself, the pin goes away.
    third, lost3 = pin_missing("Learner (B1) aims at 850 and likes travel.", [], second)
    assert lost3 == [] and PINNED_HEADER not in third


def test_pins_are_bounded() -> None:
    summary = ""
    for i in range(30):
        summary, _ = pin_missing("short", [f"fact number {i + 100}"], summary)
    assert len(pinned_quotes(summary)) == MAX_PINS
    assert "129" in summary  # the newest win
