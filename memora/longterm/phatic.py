"""Content-free chit-chat ("謝謝老師，明天見", "ok thanks!!", "哈哈好喔"): a message made only of
greetings, thanks, farewells, acknowledgements and laughter asks for no memory.

Why a rule and not a threshold: the dense side puts any short Chinese message near every Chinese
memory (USE cosine ~0.5-0.6 for "謝謝老師，明天見" against "以前學過一點日文"), above the
no-result threshold, and no weight or threshold separates it from a real question of that length.
The words themselves do: when nothing is left of a message once the phrases below, English stop
words, punctuation and emoji are taken out, it names nothing a memory could be about.

The lists are general phatic expressions of English and Chinese (繁體 folded to 简体 the way
:func:`memora.text.to_simplified` does), not words of any test set; a message with one content
word more ("thanks, what about my IELTS?") is searched as before. Hand-written: no library
classifies phatic utterances in mixed Chinese/English, and the rule must be exact and cheap.
"""

from __future__ import annotations

import functools
import re
import unicodedata

from memora.longterm.lexical import ENGLISH_STOP_WORDS
from memora.text import HAN, to_simplified

__all__ = ["CHINESE_PHRASES", "ENGLISH_WORDS", "is_phatic"]

# English words that only greet, thank, take leave, acknowledge or laugh (with the stop words).
ENGLISH_WORDS: frozenset[str] = frozenset(
    """
    hi hello hey hiya howdy yo morning afternoon evening night good goodnight gm gn
    thanks thank thx ty tysm tks thankyou cheers appreciate appreciated welcome
    bye goodbye byebye cya later brb gtg ttyl see soon tomorrow tmr tmrw care
    ok okay k kk alright sure fine cool nice great awesome perfect yes yep yup yeah nope
    understand understood gotcha got it noted right
    lol lmao haha hahaha hehe xd teacher sir miss much lot lots
    """.split()
)

# Chinese phrases of the same kinds, longest first where one contains another; removed from the
# message before the check (single characters only where they never carry a topic).
CHINESE_PHRASES: tuple[str, ...] = tuple(
    sorted(
        """
        你好 您好 大家好 早安 早上好 午安 下午好 晚上好 晚安 嗨 哈喽 哈啰 哈罗
        谢谢 多谢 感谢 感恩 谢啦 谢了 辛苦了 辛苦
        再见 拜拜 明天见 下次见 回头见 待会见 晚点见 改天见 先这样 今天就到这里 就到这里
        好的 好喔 好哦 好滴 好啊 好吧 好 嗯嗯 嗯 对 对的 是的 行 可以 没问题 了解 明白 明白了
        知道了 懂了 收到 原来如此
        哈哈哈 哈哈 呵呵 嘻嘻 嘿嘿 笑死
        老师 您 你 我 了 啊 呀 喔 哦 吧 啦 嘛 呢 噢 哟
        """.split(),
        key=len,
        reverse=True,
    )
)

_LETTERS_RE = re.compile(rf"[{HAN}]|[^\W\d_]")  # a Han character or any letter
_WORD_RE = re.compile(r"[^\W\d_]+")
_HAN_RUN_RE = re.compile(f"[{HAN}]+")


@functools.lru_cache(maxsize=4096)
def is_phatic(text: str) -> bool:
    """Whether a message is only chit-chat (see the module docstring). Numbers count as content;
    a message with no letters at all (a sticker's emoji, "???") is not called chit-chat here."""
    norm = to_simplified(unicodedata.normalize("NFKC", text).lower())
    if _LETTERS_RE.search(norm) is None:
        return False
    if any(ch.isdigit() for ch in norm):
        return False
    for run in _HAN_RUN_RE.findall(norm):
        rest = run
        for phrase in CHINESE_PHRASES:
            rest = rest.replace(phrase, "")
        if rest:
            return False
    latin = _HAN_RUN_RE.sub(" ", norm).replace("’", "'")
    for word in _WORD_RE.findall(latin.replace("'", "")):
        if word not in ENGLISH_WORDS and word not in ENGLISH_STOP_WORDS:
            return False
    return True
