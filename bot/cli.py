"""The `memora` command: run (Telegram), chat (terminal), export, usage and app-url (admin),
check (the model provider and the Telegram token)."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from pathlib import Path
from urllib.parse import urlencode

from bot.terminal import chat_loop
from memora.app import open_engine, setup_logging
from memora.config import ConfigError, Settings, load_settings
from memora.startup import StartupError, check_stores

log = logging.getLogger("memora")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="memora", description="Memora, the tutor that remembers.")
    p.add_argument("--config", help="TOML config file (default: $MEMORA_CONFIG or ./config.toml)")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("run", help="run the Telegram bot (long polling, or webhook per config)")
    chat = sub.add_parser("chat", help="talk to the engine in this terminal")
    chat.add_argument("--chat-id", type=int, default=0, help="conversation id (default 0)")
    chat.add_argument("--user-id", type=int, default=0, help="learner id (default 0)")
    chat.add_argument("--quiet", action="store_true", help="no memory status line per turn")
    exp = sub.add_parser("export", help="write one chat's data as JSON")
    exp.add_argument("--chat-id", type=int, required=True)
    exp.add_argument("-o", "--output", default="-", help="file to write (default: stdout)")
    use = sub.add_parser("usage", help="what each learner spent, with the estimated cost")
    use.add_argument("--days", type=int, default=7, help="the last N UTC days (default 7)")
    url = sub.add_parser("app-url", help="a link to a learner's page, signed with the bot token")
    url.add_argument("user_id", type=int, help="the learner's Telegram user id")
    url.add_argument("--language", default="", help="their app language, e.g. zh-TW")
    sub.add_parser("check", help="try the model provider and the Telegram token as configured")
    return p


def _app_url(settings: Settings, args: argparse.Namespace) -> int:
    """A link to the learner's page with initData signed by the configured token, in the URL
    fragment as Telegram passes it (a fragment never reaches the server or its logs)."""
    from bot.web.auth import sign  # lazily, like the bot

    if not settings.telegram.token:
        raise ConfigError("app-url signs with 'telegram.token', which is empty")
    cfg = settings.webapp
    base = cfg.public_url or f"http://{cfg.host}:{cfg.port}/app/"
    user: dict[str, object] = {"id": args.user_id, "first_name": str(args.user_id)}
    if args.language:
        user["language_code"] = args.language
    print(f"{base}#{urlencode({'tgWebAppData': sign(user, settings.telegram.token)})}")
    return 0


async def _usage(settings: Settings, args: argparse.Namespace) -> int:
    async with open_engine(settings, needs_model=False) as engine:
        assert engine.state.metering is not None  # open_engine always counts usage
        print(await engine.state.metering.report(max(1, args.days), engine.state.now()))
    return 0


async def _chat(settings: Settings, args: argparse.Namespace) -> None:
    async with open_engine(settings) as engine:
        await chat_loop(
            engine, chat_id=args.chat_id, user_id=args.user_id, show_stats=not args.quiet
        )


async def _export(settings: Settings, args: argparse.Namespace) -> int:
    async with open_engine(settings, needs_model=False) as engine:
        data = await engine.export.export_chat(args.chat_id)
    if data is None:
        print(f"memora: no data for chat {args.chat_id}", file=sys.stderr)
        return 1
    text = json.dumps(data, ensure_ascii=False, indent=2)
    if args.output == "-":
        print(text)
    else:
        await asyncio.to_thread(Path(args.output).write_text, text + "\n", encoding="utf-8")
        print(f"wrote {args.output} (messages: {len(data['history'])})", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = load_settings(args.config)
        setup_logging(settings)
        if args.command == "chat":
            asyncio.run(_chat(settings, args))
            return 0
        if args.command == "export":
            return asyncio.run(_export(settings, args))
        if args.command == "usage":
            return asyncio.run(_usage(settings, args))
        if args.command == "app-url":
            return _app_url(settings, args)
        if args.command == "check":
            from bot.check import run as check  # imported lazily, as the bot is

            return asyncio.run(check(settings))
        # imported lazily: python-telegram-bot and the bot take ~0.3 s that chat and export skip
        from bot.telegram import check_config, run_bot

        check_config(settings)  # a config error first: it must not leave a data folder behind
        check_stores(settings)  # before Telegram is contacted at all
        return run_bot(settings)
    except ConfigError as exc:
        print(f"memora: config error: {exc}", file=sys.stderr)
        return 2
    except StartupError as exc:
        print(f"memora: cannot start: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
