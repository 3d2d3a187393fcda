"""The chit-chat rule (memora.longterm.phatic): greetings, thanks, farewells, acknowledgements
and laughter, in English and Chinese, ask for no memory; one content word more and the message
is searched as before. And the word-question rule: a question about a word itself, which does
not speak of the learner, needs WORD_QUESTION_MIN_SCORE to use a memory."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memora.longterm import MemoryStore, NewMemory
from memora.longterm.phatic import (
    WORD_QUESTION_MIN_SCORE,
    is_phatic,
    is_word_question,
    min_score_for,
)

NOW = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "text",
    [
        "謝謝老師，明天見",
        "谢谢你，再见",
        "ok thanks!!",
        "Thank you so much, see you tomorrow 🙂",
        "哈哈好喔",
        "嗯嗯 好的",
        "Good morning, teacher!",
        "晚安",
        "bye",
    ],
)
def test_chit_chat_is_phatic(text: str) -> None:
    assert is_phatic(text)


@pytest.mark.parametrize(
    "text",
    [
        "謝謝老師，雅思口說要怎麼準備？",  # thanks + a question
        "thanks, what about my IELTS?",
        "see you at 8",  # a number is content
        "明天見面要說什麼",  # 見面 is not 明天見
        "good luck with the night shift",
        "今天好累啊",
        "???",  # no letters: not called chit-chat
        "",
    ],
)
def test_a_message_with_content_is_not(text: str) -> None:
    assert not is_phatic(text)


async def test_chit_chat_finds_nothing_but_neighbours_are_still_listed(
    store: MemoryStore,
) -> None:
    """The rule is part of search's no-result rule: "謝謝老師，明天見" returns no memory even at
    min_score 0 and with a previous message, while a question sharing words still does;
    `similar` (a new fact's neighbours, no threshold) is not a search and still lists them."""
    texts = ["明天要跟老師上口說課", "以前學過一點日文"]
    await store.add_many(5, [NewMemory(t) for t in texts], now=NOW)
    assert (await store.search(5, "謝謝老師，明天見", top_k=5, min_score=0.0)).hits == []
    after = await store.search(
        5, "好的，謝謝", top_k=5, min_score=0.0, extra_context="明天的口說課要準備什麼"
    )
    assert after.hits == [] and after.embedding_tokens == 0  # not even embedded
    hits = (await store.search(5, "明天的口說課要準備什麼", top_k=5, min_score=0.0)).hits
    assert hits and hits[0].memory.text == texts[0]
    assert len(await store.similar(5, "謝謝老師，明天見", k=2)) == 2


@pytest.mark.parametrize(
    "text",
    [
        "「塞車」英文怎麼說？",
        "“内卷”用英语怎么说？",
        "fish 的复数是 fish 还是 fishes？",
        "orchid 這個字要怎麼唸？",
        "butter 要怎麼唸比較道地？",
        "Wednesday 怎么拼",
        "墨尔本的英文怎么拼？",
        "墨尔本的英文怎么写？",
        "cat 和 kitten 有啥区别？",
        "light 跟 lamp 有什麼區別？",
        "幫我翻譯一下 'the early bird catches the worm'",  # 幫我 only addresses the tutor
        "What does 'procrastinate' mean?",
        "how do you spell necessary",
        "What’s the difference between affect and effect?",
        "what's the past tense of 'swim'?",
        "Where does the word 'marathon' come from?",
    ],
)
def test_a_question_about_a_word_is_a_word_question(text: str) -> None:
    assert is_word_question(text)
    assert min_score_for(text, 0.14) == WORD_QUESTION_MIN_SCORE
    assert min_score_for(text, 0.8) == 0.8  # a stricter configured min_score stays


@pytest.mark.parametrize(
    "text",
    [
        "我退休前的工作英文要怎麼講？",  # speaks of the learner
        "How do I say my flower's name in English?",
        "I work in a bank, how do you say 外匯 in English?",
        "痛风的英文是 gout 吗？我爸最近痛风发作了",
        "怎麼念書比較有效率？",  # 念書 is to study, 拼車 to carpool
        "怎麼拼車去機場比較便宜",
        "英文履歷怎麼寫？",  # a writing task, not a question about a word
        "怎麼用英文寫請假信",
        "幫我想一個週末的計畫",  # no question about a word
        "Can you help me plan my weekend in English?",
        "棒球比賽今天好精彩",
        "謝謝老師",
    ],
)
def test_other_messages_are_not(text: str) -> None:
    assert not is_word_question(text)
    assert min_score_for(text, 0.14) == 0.14
