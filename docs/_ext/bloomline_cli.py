"""The CLI reference, generated from the ``bloomline`` command's argparse parser at build time.

A page holding the block ``{bloomline-cli}`` gets, in its place, one section
per command and subcommand: usage, description, and each argument as an
``option`` entry (so ``{option}`` references to them resolve). The text is
the parser's own, so the page cannot drift from the command.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

MARKER = re.compile(r"^```\{bloomline-cli\}\n```\n", re.MULTILINE)


def _escape(text: str) -> str:
    return re.sub(r"([\\`*_\[\]<>#|{}])", r"\\\1", text)


def _help(action: argparse.Action, prog: str) -> str:
    text = action.help or ""
    if "%" in text:  # argparse's own expansion: %(default)s, %(prog)s ...
        params = {k: v for k, v in vars(action).items() if v is not argparse.SUPPRESS}
        params["prog"] = prog
        text = text % params
    return text


def _signature(action: argparse.Action) -> str:
    if not action.option_strings:
        return action.metavar or action.dest  # type: ignore[return-value]
    if action.nargs == 0:
        return ", ".join(action.option_strings)
    metavar = action.metavar or action.dest.upper()
    if isinstance(metavar, tuple):
        metavar = " ".join(metavar)
    if action.choices and not action.metavar:
        metavar = "{" + ",".join(str(c) for c in action.choices) + "}"
    return ", ".join(f"{o} {metavar}" for o in action.option_strings)


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:  # noqa: SLF001
    for action in parser._actions:  # noqa: SLF001  (argparse keeps them only here)
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            return action
    return None


def parser_markdown(parser: argparse.ArgumentParser, prog: str, level: int, summary: str = "") -> list[str]:
    out = [f"{'#' * level} `{prog}`", ""]
    if summary:
        out += [_escape(summary[0].upper() + summary[1:]) + ".", ""]
    out += ["```text", parser.format_usage().strip(), "```", ""]
    if parser.description:
        out += [_escape(parser.description), ""]
    sub = _subparsers(parser)
    shown = [a for a in parser._actions  # noqa: SLF001
             if a is not sub and a.help is not argparse.SUPPRESS and not isinstance(a, argparse._HelpAction)]  # noqa: SLF001
    out += [f"```{{program}} {prog}", "```", ""]
    for action in shown:
        out += [f"```{{option}} {_signature(action)}", ""]
        details = _escape(_help(action, prog)) or "(no help text)"
        extra = []
        if action.choices and action.metavar:
            extra.append("one of " + ", ".join(f"`{c}`" for c in action.choices))
        if action.required and action.option_strings:
            extra.append("required")
        out += [details + (f" ({'; '.join(extra)})" if extra else ""), "```", ""]
    if sub is not None:
        helps = {a.dest: a.help for a in sub._choices_actions}  # noqa: SLF001
        for name, child in sub.choices.items():
            out += parser_markdown(child, f"{prog} {name}", level + 1, helps.get(name) or "")
    return out


def inject(app: Any, docname: str, source: list[str]) -> None:
    if not MARKER.search(source[0]):
        return
    from bloomline.cli import build_parser

    parser = build_parser()
    text = "\n".join(parser_markdown(parser, parser.prog, 2)) + "\n"
    source[0] = MARKER.sub(lambda _: text, source[0], count=1)


def setup(app: Any) -> dict[str, Any]:
    app.connect("source-read", inject)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
