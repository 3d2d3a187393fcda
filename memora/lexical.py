"""Lexical retrieval: a tokenizer for mixed Chinese/English text and a small Okapi BM25.

The tokenizer is written for learners who mix 繁體, 简体 and English in one message:

* text is NFKC-normalised (full-width ``ＩＥＬＴＳ`` becomes ``ielts``) and lower-cased;
* Latin words and numbers are kept whole, including ``b1``, ``toeic``, ``850`` and ``6.5``;
  a short English stop-word list is dropped and a light suffix stripper folds
  ``exams``/``exam``, ``studying``/``study``;
* runs of Han characters give unigrams and bigrams (``準備雅思`` → 準, 備, 雅, 思, 準備, 備雅,
  雅思), after folding common traditional characters to simplified ones so ``考試`` matches
  ``考试``; a few exam names also emit their English token (``雅思`` → ``ielts``), because
  learners write them either way.

BM25 is Okapi BM25 with the non-negative IDF ``log(1 + (N - n + 0.5) / (n + 0.5))`` (as in
Lucene), so a term that appears in most of a user's few memories still counts a little instead of
counting against the memory.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["BM25", "tokenize"]

# Han ideographs (CJK unified, extension A, compatibility) plus kana, which also come unspaced.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN_RE = re.compile(
    rf"(?P<cjk>[{_CJK}]+)"  # a run of Han/kana characters
    rf"|(?P<word>[^\W_{_CJK}]+(?:\.[0-9]+)?(?:['’][^\W_{_CJK}]+)?)"  # a word, 6.5, don't
)

ENGLISH_STOP_WORDS: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just let me more most my myself no nor not of off on once only or other our ours ourselves out
    over own same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves
    s t d ll m re ve don doesn didn isn wasn aren weren won wouldn shouldn couldn hasn haven hadn
    im ive id youre thats whats also get got really yeah oh hey hi hello ok okay
    """.split()
)

# Function characters whose unigram carries no topic (the bigrams they are part of are kept).
CHINESE_STOP_CHARS: frozenset[str] = frozenset(
    "的了是我你他她它在和跟也都很吗呢吧啊呀嘛这那个们就还有要不把被给着过得地么一"
)

# Common traditional → simplified characters: enough for learner messages, not a full converter.
_T2S_PAIRS = """
試试 語语 說说 話话 讀读 寫写 聽听 學学 習习 練练 題题 詞词 彙汇 單单 級级 準准 備备 會会 認认
識识 誤误 錯错 難难 發发 髮发 點点 應应 該该 對对 門门 們们 這这 個个 麼么 為为 還还 過过 從从
後后 時时 間间 歲岁 兒儿 開开 關关 係系 實实 際际 機机 場场 遊游 戲戏 樂乐 歡欢 興兴 國国 灣湾
華华 東东 車车 飛飞 買买 賣卖 錢钱 貴贵 醫医 藥药 體体 動动 運运 煩烦 緊紧 張张 輕轻 鬆松 慣惯
頭头 總总 結结 構构 態态 詳详 細细 簡简 複复 雜杂 報报 導导 線线 網网 絡络 劇剧 視视 紐纽 約约
課课 師师 長长 進进 經经 驗验 專专 業业 職职 讓让 幫帮 聲声 調调 與与 現现 見见 憶忆 記记 沒没
書书 電电 員员 筆笔 紙纸 畫画 圖图 館馆 樣样 標标 較较 變变 換换 離离 遠远 邊边 裡里 處处 歷历
週周 號号 務务 計计 劃划 參参 觀观 讚赞 覺觉 親亲 愛爱 媽妈 孫孙 婦妇 禮礼 節节 夢梦 紅红 綠绿
藍蓝 黃黄 顏颜 魚鱼 雞鸡 麵面 飯饭 飲饮 湯汤 蘋苹 鳥鸟 貓猫 馬马 龍龙 風风 雲云 氣气 溫温 熱热
雙双 壓压 帶带 銷销 廣广 傳传 統统 選选 擇择 測测 績绩 閱阅 溝沟 協协 議议 論论 證证 據据 權权
歐欧 韓韩 義义 賽赛 隊队 籃篮 術术 藝艺 設设 軟软 質质 產产 區区 廠厂 夠够 寬宽 順顺 誌志 鐘钟
錶表 鍵键 盤盘 腦脑 訊讯 郵邮 請请 謝谢 問问 聯联 隨随 陽阳 陰阴 歸归 園园 達达 遲迟 願愿 慮虑
擔担 憂忧 嗎吗 極极 淺浅 漸渐 聰聪 靜静 確确 獨独 勵励 續续 斷断 辦办 組组 織织 衛卫 獎奖 贏赢
輸输 談谈 講讲 詩诗 誰谁 訓训 許许 評评 詢询 註注 譯译 護护 紀纪 綜综 維维 緒绪 罰罚 羅罗 聞闻
聖圣 膽胆 腳脚 臉脸 舊旧 舉举 蘭兰 蟲虫 衝冲 補补 裝装 製制 規规 覽览 觸触 訂订 討讨 託托 訴诉
診诊 誇夸 誕诞 諾诺 豐丰 貝贝 負负 財财 貨货 販贩 貧贫 責责 費费 資资 賓宾 賞赏 賺赚 趕赶 趨趋
跡迹 踐践 輛辆 輩辈 輪轮 農农 連连 違违 遞递 適适 遺遗 鄉乡 醬酱 釋释 針针 銀银 鋼钢 錄录 鍛锻
鍊炼 鏡镜 鐵铁 閃闪 閉闭 閒闲 階阶 險险 隱隐 雖虽 靈灵 響响 頁页 頂顶 項项 須须 預预 領领 頻频
額额 顧顾 類类 飽饱 養养 駕驾 騎骑 驚惊 鬧闹 鹽盐 麗丽 麥麦 齊齐 齒齿 龜龟 臺台 於于 餘余 隻只
聽听 衹只 曆历 鐘钟 專专 歲岁 萬万 億亿 兩两 幾几 殺杀 塊块 壞坏 實实 寶宝 寫写 將将 屬属 帥帅
師师 廳厅 彈弹 徵征 憤愤 懷怀 戰战 掃扫 擁拥 數数 斷断 暫暂 曉晓 條条 構构 樓楼 檢检 歷历 殘残
滿满 漢汉 濟济 無无 煙烟 燈灯 爭争 牆墙 獲获 環环 療疗 盡尽 碼码 礎础 稱称 穩稳 筆笔 範范 簽签
糧粮 緩缓 編编 縣县 總总 繼继 聯联 職职 腦脑 膚肤 艱艰 藝艺 蘇苏 術术 衆众 裏里 覺觉 觀观 計计
記记 訪访 誠诚 誼谊 諮咨 謎谜 證证 識识 讀读 變变 貼贴 賴赖 趙赵 較较 辭辞 農农 邏逻 醒醒 鎮镇
陳陈 陸陆 隨随 雜杂 電电 韋韦 頓顿 飄飘 騙骗 髒脏 鬥斗 鮮鲜 點点
"""
T2S: dict[str, str] = {
    pair[0]: pair[1] for pair in _T2S_PAIRS.split() if len(pair) == 2 and pair[0] != pair[1]
}
_T2S_TABLE = str.maketrans(T2S)

# Exam names learners write in Chinese or in English; the Chinese form also emits the English token.
ALIASES: dict[str, str] = {
    "雅思": "ielts",
    "托福": "toefl",
    "多益": "toeic",
    "托业": "toeic",
    "全民英检": "gept",
    "英检": "gept",
}


# Words the suffix stripper must leave alone (exam names, words that only look inflected).
_NO_STEM: frozenset[str] = frozenset(
    """
    ielts toefl toeic gept always news series species physics maths mathematics economics
    politics lens bus gas yes thing during morning evening nothing something anything
    everything ring sing king wing bring spring string swing sling sibling ceiling wedding
    pudding bed red need speed feed seed hundred
    """.split()
)


def _stem(word: str) -> str:
    """A light English suffix stripper (plural, -ing, -ed), enough to fold inflections."""
    if len(word) <= 3 or not word.isalpha() or word in _NO_STEM:
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("sses"):
        return word[:-2]
    if word.endswith("ing") and len(word) > 5:
        word = word[:-3]
    elif word.endswith("ed") and len(word) > 4:
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    else:
        return word
    # undouble "running" → "runn" → "run", "planned" → "plann" → "plan"
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
        word = word[:-1]
    return word


def tokenize(text: str, *, stem: bool = True) -> list[str]:
    """Split mixed Chinese/English text into BM25 terms (see the module docstring)."""
    norm = unicodedata.normalize("NFKC", text).lower().translate(_T2S_TABLE)
    out: list[str] = []
    for m in _TOKEN_RE.finditer(norm):
        run = m.group("cjk")
        if run is not None:
            out.extend(c for c in run if c not in CHINESE_STOP_CHARS)
            out.extend(run[i : i + 2] for i in range(len(run) - 1))
            aliases = {alias for key, alias in ALIASES.items() if key in run}
            out.extend(sorted(_stem(a) if stem else a for a in aliases))
            continue
        term = _word_term(m.group("word"), stem)
        if term is not None:
            out.append(term)
    return out


@functools.lru_cache(maxsize=65536)
def _word_term(word: str, stem: bool) -> str | None:
    """The term for one Latin word or number, or None for a stop word."""
    word = word.replace("’", "'")
    if "'" in word:
        word = word.split("'", 1)[0]  # caroline's → caroline, don't → don (a stop word)
    if word in ENGLISH_STOP_WORDS or (len(word) == 1 and not word.isdigit()):
        return None
    return _stem(word) if stem else word


Vector = npt.NDArray[np.float64]


class BM25:
    """Okapi BM25 over a fixed list of documents (one user's memories, or one benchmark pool)."""

    def __init__(
        self,
        docs: Iterable[Sequence[str]],
        *,
        k1: float = 1.2,
        b: float = 0.75,
    ) -> None:
        """Index pre-tokenized documents; use :meth:`from_texts` to tokenize as well."""
        self.k1 = k1
        self.b = b
        freqs = [Counter(d) for d in docs]
        self.n_docs = len(freqs)
        lengths = np.array([sum(f.values()) for f in freqs], dtype=np.float64)
        self.doc_len = lengths
        avgdl = float(lengths.mean()) if self.n_docs and lengths.sum() > 0 else 1.0
        self.avgdl = avgdl
        # Per-document length factor of the BM25 denominator: k1 * (1 - b + b * dl / avgdl).
        self._len_norm = k1 * (1.0 - b + b * lengths / avgdl)
        postings: dict[str, tuple[list[int], list[float]]] = {}
        for i, f in enumerate(freqs):
            for term, tf in f.items():
                ids, tfs = postings.setdefault(term, ([], []))
                ids.append(i)
                tfs.append(float(tf))
        self._postings: dict[str, tuple[npt.NDArray[np.intp], Vector]] = {
            t: (np.asarray(ids, dtype=np.intp), np.asarray(tfs, dtype=np.float64))
            for t, (ids, tfs) in postings.items()
        }

    @classmethod
    def from_texts(cls, texts: Iterable[str], *, k1: float = 1.2, b: float = 0.75) -> BM25:
        return cls([tokenize(t) for t in texts], k1=k1, b=b)

    def __len__(self) -> int:
        return self.n_docs

    def _idf_n(self, n: int) -> float:
        return math.log(1.0 + (self.n_docs - n + 0.5) / (n + 0.5))

    def idf(self, term: str) -> float:
        """Non-negative IDF of a term held by n of the N documents."""
        posting = self._postings.get(term)
        return self._idf_n(0 if posting is None else len(posting[0]))

    def _saturated_tf(self, term: str) -> tuple[npt.NDArray[np.intp], Vector] | None:
        posting = self._postings.get(term)
        if posting is None:
            return None
        ids, tfs = posting
        return ids, tfs * (self.k1 + 1.0) / (tfs + self._len_norm[ids])

    def scores(self, query: Sequence[str]) -> Vector:
        """Plain BM25 score of every document for the query terms (repeats count again)."""
        out = np.zeros(self.n_docs, dtype=np.float64)
        for term in query:
            sat = self._saturated_tf(term)
            if sat is not None:
                ids, weight = sat
                out[ids] += self.idf(term) * weight
        return out

    def coverage(self, query: Sequence[str]) -> Vector:
        """How much of the query each document holds, in [0, 1].

        The IDF-weighted share of the distinct query terms that a document contains, each term's
        contribution being its BM25 term weight capped at that of one occurrence in a document of
        average length. Unlike a BM25 score divided by the best one, it is absolute: a memory that
        shares only a common word with the message scores low even when it is the best match.
        Query terms that no document contains count in the denominator too, each with the weight
        of a term that one document holds.
        """
        out = np.zeros(self.n_docs, dtype=np.float64)
        total = 0.0
        for term in set(query):
            sat = self._saturated_tf(term)
            # A term no memory holds weighs as much as one that a single memory holds: so the
            # share does not depend on how many memories the user has (1 or 1,000+).
            idf = self.idf(term) if sat is not None else self._idf_n(1)
            total += idf
            if sat is not None:
                ids, weight = sat
                out[ids] += idf * np.minimum(weight, 1.0)
        if total > 0.0:
            out /= total
        return out
