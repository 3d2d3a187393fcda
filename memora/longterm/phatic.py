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

__all__ = [
    "CHINESE_PHRASES",
    "ENGLISH_WORDS",
    "WORD_QUESTION_MIN_SCORE",
    "is_phatic",
    "is_word_question",
    "min_score_for",
]

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


# ------------------------------------------------------------------ questions about a word

# A question about a word or phrase itself: how to say, pronounce, spell or translate it, what it
# means, how two words differ, its plural or past tense ("「塞車」英文怎麼說？", "fish 的复数是
# fish 还是 fishes？", "What does 'procrastinate' mean?"). Such a message often names a thing a
# memory is about (a learner who loves baseball asks for "全壘打" in English) while no fact about
# the learner helps the answer, so a memory must match it strongly to be returned
# (WORD_QUESTION_MIN_SCORE). A message that also speaks of the learner ("我退休前的工作英文要怎麼
# 講", "how to say my flower name") is ranked as any other, and so is a writing task ("英文履歷怎麼
# 寫", "怎麼用英文寫請假信": the learner's facts shape it). General markers of metalinguistic
# questions in Chinese (folded to 简体, with the few characters the fold leaves: 給 別) and
# English, not words of any test set; hand-written for the same reasons as the chit-chat rule.
_ZH_WORD_QUESTION = re.compile(
    r"英(?:文|语)[^，。？！?!,.]{0,6}(?:怎么|如何)(?:说|讲|拼|表达|翻)"
    r"|(?:怎么|如何)用英(?:文|语)(?:说|讲|表达)"
    r"|英(?:文|语)(?:是|叫)(?:什么|啥)|的英(?:文|语)(?:是|叫|怎么|要怎么)"
    r"|英(?:文|语)(?:的)?(?:说法|讲法|名字|单字|单词)(?:是|有)"
    # how to pronounce or spell it, not 念书/读书 (study) or 拼车 (carpool): no other Han
    # character may follow, but for 才/比较/呢/吗/的 ("怎麼唸比較道地")
    r"|(?:怎么|如何)(?:念|唸|读|发音|拼写|拼)(?=$|[^\u4e00-\u9fff]|才|比较|呢|吗|的)"
    r"|(?:读音|发音|念法|唸法|读法)(?:是|对)"
    r"|复数|单数|过去式|过去分词|现在分词|比较级|最高级|重音|音标|词性|拼法|拼写|同义词|反义词|用法"
    r"|(?:什么|啥)意思|(?:什么|啥)(?:区|差)(?:别|別)|(?:什么|啥)(?:不一样|不同|差异)"
    r"|翻译|翻成|(?:这个|那个)(?:字|词|单字|单词)|可以加\s*(?:s|es|ed|ing)\b"
)
_EN_WORD_QUESTION = re.compile(
    r"\bhow (?:do|would|can|should|could) (?:you|i|we|one) "
    r"(?:say|pronounce|spell|translate|use the word)\b"
    r"|\bhow to (?:say|pronounce|spell|use the word)\b"
    r"|\bhow is .{1,30} (?:pronounced|spelled|spelt)\b"
    r"|\bwhat does .{1,40} mean\b|\bwhat(?:'s| is) the meaning\b|\bmeaning of\b"
    r"|\bdifference between\b|\bplural (?:of|form)\b|\bpast (?:tense|participle) of\b"
    r"|\bsynonyms?\b|\bantonyms?\b|\b(?:where does|origin of) the (?:word|phrase|expression)\b"
    r"|\bis it correct to say\b|\btranslate\b"
)
# The learner speaking of themselves: 我 (not "帮我/给我/教我…", which only address the tutor),
# "my", "I'm", "I have", "I work", "I live".
_SPEAKS_OF_LEARNER = re.compile(
    r"(?<![帮给給教跟诉让请替])我|\bmy\b|\bi(?:'m| am| have| work| live)\b"
)

# The score a hit needs when the message is a question about a word (see above), instead of
# min_score when that is lower. Chosen on development learners and adopted by a rule fixed before
# a blind set measured it (benchmarks/data/README.md, "Questions about a word"; figures:
# benchmarks/retrieval.py --fresh benchmarks/data/learner_set_fresh4.json).
WORD_QUESTION_MIN_SCORE = 0.6


@functools.lru_cache(maxsize=4096)
def is_word_question(text: str) -> bool:
    """Whether a message asks about a word or phrase itself and does not speak of the learner
    (see WORD_QUESTION_MIN_SCORE)."""
    norm = to_simplified(unicodedata.normalize("NFKC", text).lower()).replace("’", "'")
    if not (_ZH_WORD_QUESTION.search(norm) or _EN_WORD_QUESTION.search(norm)):
        return False
    return _SPEAKS_OF_LEARNER.search(norm) is None


def min_score_for(message: str, min_score: float) -> float:
    """The score a memory needs to be used for this message: `min_score`, or
    WORD_QUESTION_MIN_SCORE when the message is a question about a word and that is higher."""
    if is_word_question(message):
        return max(min_score, WORD_QUESTION_MIN_SCORE)
    return min_score
