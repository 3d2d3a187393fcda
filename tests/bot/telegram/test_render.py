"""Rendering for Telegram: Markdown → HTML that always parses, splitting below 4096, long views."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.telegram.render import (
    MAX_CAPTION,
    MAX_MESSAGES,
    MAX_TEXT,
    html_to_plain,
    is_balanced,
    markdown_to_html,
    plan,
    split_text,
    tg_len,
)
from memora.views import Document, Reply
from tests.support.fake_telegram import parse_html


def visible(fragment: str) -> str:
    """What Telegram shows for an HTML fragment (the fake parses like Telegram does)."""
    return parse_html(fragment)[0]


# -- conversion ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("**bold** and __bold__", "<b>bold</b> and <b>bold</b>"),
        ("*it* and _it_", "<i>it</i> and <i>it</i>"),
        ("~~gone~~", "<s>gone</s>"),
        ("use `a < b && c`", "use <code>a &lt; b &amp;&amp; c</code>"),
        ("[docs](https://x.org/a_b?q=1&r=2)", '<a href="https://x.org/a_b?q=1&amp;r=2">docs</a>'),
        ("# Title **x**", "<b>Title x</b>"),
        ("- one\n* two\n+ three", "• one\n• two\n• three"),
        ("snake_case_name and 2*3*4", "snake_case_name and 2*3*4"),
        ("<script>alert(1)</script> & co", "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co"),
        ("a ** b ** c", "a ** b ** c"),
        ("[bad](javascript:alert(1))", "[bad](javascript:alert(1))"),
    ],
)
def test_markdown_to_html(markdown: str, expected: str) -> None:
    assert markdown_to_html(markdown) == expected


def test_code_block_keeps_its_text_verbatim() -> None:
    md = "Try:\n```python\nif a < b and x_y_z:\n    print('**not bold**')\n```\nDone."
    out = markdown_to_html(md)
    assert '<pre><code class="language-python">' in out
    assert "print('**not bold**')" in out
    assert "<b>" not in out
    assert visible(out) == "Try:\nif a < b and x_y_z:\n    print('**not bold**')\nDone."


def test_unclosed_markers_stay_literal() -> None:
    for md in ("**never closed", "`open code", "```\nno end", "_half", "[x](http://a"):
        out = markdown_to_html(md)
        assert is_balanced(out)
        assert visible(out) == md


def test_nested_markers_never_misnest() -> None:
    for md in ("**a *b***", "***both***", "**a [b** c](https://x.y)", "_a **b_ c**"):
        out = markdown_to_html(md)
        assert is_balanced(out), out
        parse_html(out)  # Telegram would accept it


def test_placeholder_characters_in_input_are_harmless() -> None:
    out = markdown_to_html("x \ue0000\ue001 `y`")
    assert visible(out) == "x 0 y"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab *_`~[]()#-<>&\n:/.hxtps")), max_size=80))
def test_any_markdown_gives_parseable_html(md: str) -> None:
    out = markdown_to_html(md)
    assert is_balanced(out)
    parse_html(out)


# -- splitting --------------------------------------------------------------------------------
def test_short_text_is_one_chunk() -> None:
    assert split_text("  hello  ") == ["hello"]
    assert split_text("") == []


def test_splits_at_paragraphs_first() -> None:
    para = "word " * 300  # ~1500 chars
    text = "\n\n".join(para.strip() for _ in range(6))
    chunks = split_text(text)
    assert all(tg_len(c) <= MAX_TEXT for c in chunks)
    assert all(c.endswith("word") and c.startswith("word") for c in chunks)
    assert "".join(chunks).replace("\n", "").replace(" ", "") == text.replace("\n", "").replace(
        " ", ""
    )
    assert sum(c.count("\n\n") for c in chunks) + len(chunks) - 1 == 5  # no paragraph cut


def test_splits_at_lines_then_sentences_then_words_then_hard() -> None:
    lines = "\n".join(f"line {i} " + "x" * 50 for i in range(200))
    assert all(c.split("\n")[-1].startswith("line") for c in split_text(lines))

    sentences = " ".join(f"Sentence {i} is here." for i in range(600))
    chunks = split_text(sentences)
    assert all(c.endswith(".") for c in chunks)

    words = " ".join(["abcdefg"] * 2000)
    assert all(c.endswith("abcdefg") for c in split_text(words))

    blob = "x" * 10_000
    assert [len(c) for c in split_text(blob)] == [4096, 4096, 1808]


def test_chinese_sentences_split_after_full_stop() -> None:
    text = "我今天学习英语。" * 1200
    chunks = split_text(text)
    assert len(chunks) > 1
    assert all(c.endswith("。") and tg_len(c) <= MAX_TEXT for c in chunks)
    assert "".join(chunks) == text


def test_limit_counts_utf16_units() -> None:
    chunks = split_text("😀" * 5000)
    assert all(tg_len(c) <= MAX_TEXT for c in chunks)
    assert "".join(chunks) == "😀" * 5000


def test_html_split_never_cuts_tags_or_entities_and_reopens_tags() -> None:
    md = "**" + " ".join(["bold & <brave>"] * 700) + "**\n\n```\n" + "code < line\n" * 700 + "```"
    chunks = split_text(markdown_to_html(md), is_html=True)
    assert len(chunks) > 2
    for c in chunks:
        assert tg_len(c) <= MAX_TEXT
        assert is_balanced(c), c[-40:]
        parse_html(c)
    assert chunks[1].startswith("<b>") or chunks[1].startswith("<pre>")
    shown = " ".join(visible(c) for c in chunks)
    assert shown.count("bold & <brave>") == 700  # cuts fall on spaces and newlines
    assert shown.count("code < line") == 700


def test_html_hard_cut_avoids_entities() -> None:
    html = "&amp;" * 3000  # no boundary anywhere
    chunks = split_text(html, limit=1000, is_html=True)
    assert all(c.endswith("&amp;") and c.startswith("&amp;") for c in chunks)
    assert "".join(chunks) == html


@settings(max_examples=150, deadline=None)
@given(
    st.text(alphabet=st.sampled_from(list("ab *_`\n .。&<>😀")), min_size=0, max_size=3000),
    st.integers(min_value=200, max_value=700),
)
def test_split_loses_nothing_visible(md: str, limit: int) -> None:
    html = markdown_to_html(md)
    chunks = split_text(html, limit=limit, is_html=True)
    assert all(tg_len(c) <= limit and is_balanced(c) for c in chunks)
    squash = "".join(visible(html).split())
    assert "".join("".join(visible(c).split()) for c in chunks) == squash


# -- planning --------------------------------------------------------------------------------
def test_plan_model_reply_is_html() -> None:
    out = plan(Reply("**Great** job", markdown=True), markdown=True)
    assert out.is_html and out.messages == ["<b>Great</b> job"] and not out.documents


def test_plan_shows_the_note_as_plain_text_above_the_reply() -> None:
    reply = Reply("**Great** job", markdown=True, note="✅ Saved: 2 * 3 < 7 & *fine*")
    out = plan(reply, markdown=True)
    assert out.messages == ["✅ Saved: 2 * 3 &lt; 7 &amp; *fine*\n\n<b>Great</b> job"]
    assert plan(reply, markdown=False).messages == [reply.plain]


def test_plan_debug_view_is_plain_and_split() -> None:
    text = "\n".join(f"{i}. you: " + "y" * 60 for i in range(150))  # ~10k chars
    out = plan(Reply(text), markdown=False)
    assert not out.is_html and 2 <= len(out.messages) <= MAX_MESSAGES
    assert "\n".join(out.messages) == text


def test_plan_very_long_view_becomes_a_file() -> None:
    text = "\n".join(f"{i}. you: " + "z" * 200 for i in range(400))  # ~84k chars
    out = plan(Reply(text), markdown=False, name="history")
    assert out.messages == []
    (doc,) = out.documents
    assert doc.filename == "history.txt"
    assert doc.content.decode() == text  # never truncated
    assert "file" in doc.caption and tg_len(doc.caption) <= MAX_CAPTION


def test_plan_document_takes_the_text_as_caption() -> None:
    blob = json.dumps({"history": []}).encode()
    reply = Reply("Export of chat 5: 0 messages.", document=Document("c.json", blob, "chat 5"))
    out = plan(reply, markdown=False)
    assert out.messages == []
    assert out.documents[0].caption == "Export of chat 5: 0 messages."
    assert out.documents[0].content == blob


def test_html_to_plain() -> None:
    assert html_to_plain('<b>a</b> &amp; <a href="x">b</a> &lt;c&gt;') == "a & b <c>"
