"""Text helpers shared by lexical search, duplicate detection and key facts: one of each.

Learners mix 繁體, 简体 and English in one message, so every comparison of memory texts folds
traditional characters to simplified ones (:func:`to_simplified`), finds Han runs with the same
ranges (:data:`HAN`), folds English inflections with the same light stemmer (:func:`stem`), and
knows the same exam names in both languages (:data:`EXAMS`).

Hand-written rather than a library: OpenCC and NLTK/Snowball would do the folding and stemming,
but the project ships no native or data-downloading dependency for a ~500-character table and a
plural/-ing/-ed stripper, and the stemmer must leave exam names and short words alone.
"""

from __future__ import annotations

__all__ = ["EXAMS", "EXAM_ALIASES", "HAN", "KANA", "T2S", "stem", "to_simplified"]

# Han ideographs: CJK unified, extension A, compatibility.
HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
# Hiragana and katakana, which also come unspaced.
KANA = "\u3040-\u30ff"

# Exams learners name in English or in Chinese (繁體 and 简体 spellings): the English name, then
# its Chinese names, longest first where one contains another (全民英檢 before 英檢).
EXAMS: dict[str, tuple[str, ...]] = {
    "toeic": ("多益", "托业", "托業"),
    "ielts": ("雅思",),
    "toefl": ("托福",),
    "gept": ("全民英檢", "全民英检", "英檢", "英检"),
}
# Chinese name → English name.
EXAM_ALIASES: dict[str, str] = {zh: en for en, names in EXAMS.items() for zh in names}

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


def to_simplified(text: str) -> str:
    """The text with the traditional characters of :data:`T2S` folded to simplified ones."""
    return text.translate(_T2S_TABLE)


# Words the suffix stripper must leave alone (exam names, words that only look inflected).
_NO_STEM: frozenset[str] = frozenset(
    """
    ielts toefl toeic gept always news series species physics maths mathematics economics
    politics lens bus gas yes thing during morning evening nothing something anything
    everything ring sing king wing bring spring string swing sling sibling ceiling wedding
    pudding bed red need speed feed seed hundred
    """.split()
)


def stem(word: str) -> str:
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
