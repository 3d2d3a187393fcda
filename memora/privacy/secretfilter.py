"""The secret filter: code, not the prompt, decides that a secret is never stored.

`looks_secret` screens memories (a tutor never needs to remember a password); `mask_secrets`
hides what it finds inside a message before the message is written anywhere (the Telegram
inbox and outbox, history, last context, summaries, the extraction call, logs); `secret_spans`
says where, for adapters that must move formatting with the mask. Hand-written: no maintained
library covers passwords written in prose ("my password is …", "密碼是 …") next to key
formats, card and ID numbers.
"""

from __future__ import annotations

import re

__all__ = ["MASK", "looks_secret", "mask_secrets", "secret_spans"]

MASK = "[secret hidden]"


_SECRET_WORDS = re.compile(
    r"pass(?:word|wd|code|phrase)s?\b|\bpwd\b|pin[\s-]?(?:code|number)|\bcvv2?\b|\bcvc\b"
    r"|\botp\b|one[\s-]time\s+(?:code|password)|verification\s+code|security\s+code"
    r"|\b(?:api|secret|private|access|auth|bot|bearer|refresh)[\s_-]?(?:key|token)s?\b"
    r"|seed\s+phrase|recovery\s+(?:phrase|code)s?"
    r"|密碼|密码|口令|驗證碼|验证码|安全碼|安全码|金鑰|金钥|密鑰|密钥|私鑰|私钥|助記詞|助记词"
    r"|卡號|卡号|身分證字號|身份證字號|身份证号",
    re.IGNORECASE,
)
_PIN = re.compile(r"\bPIN\b|PIN碼|PIN码")  # upper case only: "pin" vs "pen" is a lesson topic
_KEY_PATTERNS = re.compile(
    r"\bsk-[A-Za-z0-9_-]{16,}"  # OpenAI and similar
    r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"  # AWS access key id
    r"|\bgh[pousr]_[A-Za-z0-9]{30,}|\bgithub_pat_\w{20,}"
    r"|\bxox[abprs]-[A-Za-z0-9-]{10,}"  # Slack
    r"|\bAIza[0-9A-Za-z_-]{30,}"  # Google
    r"|\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\."  # JWT
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----"
    r"|\b\d{6,12}:[A-Za-z0-9_-]{30,}"  # Telegram bot token
    r"|\b[A-Z][12]\d{8}\b"  # Taiwan national ID
    r"|\b\d{17}[\dXx]\b"  # PRC resident ID
)
_LONG_TOKEN = re.compile(r"[A-Za-z0-9_-]{24,}")
_DIGIT_RUN = re.compile(r"\d(?:[ -]?\d){11,22}")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b")


def _luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _iban_ok(candidate: str) -> bool:
    code = candidate.replace(" ", "")
    if not 15 <= len(code) <= 34:
        return False
    moved = code[4:] + code[:4]
    number = "".join(str(int(ch, 36)) for ch in moved)
    return int(number) % 97 == 1


def looks_secret(text: str) -> bool:
    """True if the text mentions or contains a credential, a card/account number or an ID.

    Deliberately broad: a tutor never needs to remember a password, and a false alarm only
    costs one memory.
    """
    if _SECRET_WORDS.search(text) or _PIN.search(text) or _KEY_PATTERNS.search(text):
        return True
    for token in _LONG_TOKEN.findall(text):
        if any(c.isdigit() for c in token) and any(c.isalpha() for c in token):
            return True  # a long random-looking key
    for run in _DIGIT_RUN.findall(text):
        digits = re.sub(r"\D", "", run)
        if 13 <= len(digits) <= 19 and _luhn_ok(digits):
            return True  # a payment card number
        if len(digits) >= 20:
            return True  # an account number
    return any(_iban_ok(m) for m in _IBAN.findall(text.upper()))


# A keyword, an optional "is" / ":" / "是", then the value itself. Upper-case PIN only (see _PIN).
_VALUE = re.compile(
    rf"(?:(?i:{_SECRET_WORDS.pattern})|{_PIN.pattern})"
    r"(?P<sep>\s*(?:(?:is|was|are|=|:|：)\s*[:：=]?|是|為|为|[:：=])?\s*)"
    r"(?P<value>[^\s，。、,;；!?！？\"'「」『』()（）<>]+)"
)
_PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.DOTALL
)
# Inside a message or a log line a key without a known prefix is one long run of letters and
# digits; unlike `_LONG_TOKEN` (which screens whole memories) it stops at "_", "-" and "/", so
# file paths, test names and UUIDs in log lines stay readable.
_RANDOM_RUN = re.compile(r"[A-Za-z0-9]{20,}")
_IBAN_ANY_CASE = re.compile(_IBAN.pattern, re.IGNORECASE)


def _value_spans(text: str) -> list[tuple[int, int]]:
    """Values written after a secret's name: masked when joined by "is", ":", "是"… or when
    they hold a digit or symbol ("password hunter2"), never a plain next word ("password
    manager")."""
    spans = []
    for m in _VALUE.finditer(text):
        if text.startswith(MASK, m.start("value")):
            continue  # masked already: masking is idempotent
        value = m.group("value").rstrip(".")
        if not any(c.isalnum() for c in value):
            continue
        if m.group("sep").strip() or not value.isalpha():
            spans.append((m.start("value"), m.start("value") + len(value)))
    return spans


def _pattern_spans(text: str) -> list[tuple[int, int]]:
    """Keys, tokens, card, account and ID numbers: the same tests as `looks_secret`."""
    spans = [m.span() for m in _PRIVATE_KEY.finditer(text)]
    spans += [m.span() for m in _KEY_PATTERNS.finditer(text)]
    for m in _RANDOM_RUN.finditer(text):
        token = m.group()
        if sum(c.isdigit() for c in token) >= 3 and sum(c.isalpha() for c in token) >= 3:
            spans.append(m.span())
    for m in _DIGIT_RUN.finditer(text):
        digits = re.sub(r"\D", "", m.group())
        if (13 <= len(digits) <= 19 and _luhn_ok(digits)) or len(digits) >= 20:
            spans.append(m.span())
    spans += [m.span() for m in _IBAN_ANY_CASE.finditer(text) if _iban_ok(m.group().upper())]
    return spans


def secret_spans(text: str) -> list[tuple[int, int]]:
    """Where the secrets the filter recognises are in `text`: sorted, non-overlapping
    (start, end) index pairs, each to be replaced by one MASK."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(_value_spans(text) + _pattern_spans(text)):
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def mask_secrets(text: str) -> str:
    """The text with every secret the filter recognises replaced by MASK."""
    spans = secret_spans(text)
    if not spans:
        return text
    out, at = [], 0
    for start, end in spans:
        out.append(text[at:start])
        out.append(MASK)
        at = end
    out.append(text[at:])
    return "".join(out)
