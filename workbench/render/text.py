"""Highlighted text: the IR's names and keywords, CUDA through Pygments, and consoles
that print plain text where colour does not belong."""

from __future__ import annotations

import os
from typing import TextIO

from rich.console import Console
from rich.highlighter import RegexHighlighter
from rich.markup import escape
from rich.rule import Rule
from rich.syntax import Syntax
from rich.text import Text
from rich.theme import Theme

# One colour per segment, by group id (cycled), and one per scheduler (graph clusters).
GROUP_COLORS = ("cyan", "magenta", "yellow", "green", "blue", "red", "bright_cyan", "bright_magenta")
SCHEDULER_COLORS = {
    "pointwise": "#8dd3c7",
    "reduction": "#fb8072",
    "inner_persistent": "#bebada",
    "outer_persistent": "#80b1d3",
    "inner_outer_persistent": "#bc80bd",
    "transpose": "#fdb462",
    "expr_eval": "#b3de69",
    "no_op": "#d9d9d9",
}

THEME = Theme(
    {
        "ir.tensor": "bold cyan",
        "ir.iterdomain": "green",
        "ir.scalar": "magenta",
        "ir.keyword": "bold yellow",
        "ir.number": "blue",
        "ir.header": "bold white on blue",
        "ir.accepted": "bold green",
        "ir.rejected": "bold red",
        "diff.added": "green",
        "diff.removed": "red",
        "diff.hunk": "cyan",
        "cache.hit": "bold green",
        "cache.miss": "bold yellow",
        "note": "italic dim",
        "error": "bold red",
    }
)


class IrHighlighter(RegexHighlighter):
    """nvFuser's debug text: `T2_l`, `iS10{i0}`, `i17`, `Split:`, `%kernel`."""

    base_style = "ir."
    highlights = [  # noqa: RUF012 (rich's own API: a class attribute list)
        r"(?P<number>(?<![\w.])\d+(?![\w.]))",
        r"(?P<scalar>(?<![\w.])[idfbc]\d+(?![\w.]))",
        r"(?P<iterdomain>(?<![\w.])[irbsnv?](?:S|blockIdx\.[xyz]|threadIdx\.[xyz]|V|UR|US|MMA|G|B)\d+(?=\{))",
        r"(?P<tensor>(?<![\w.])T\d+(?:_[lgst])?(?![\w.]))",
        r"(?P<keyword>%kernel_math|%kernel|%Kernel|TransformPrinter|Outer split:|Split:|Merge:|Resize:"
        r"|root domain|logical domain|allocation domain|loop domain|contiguity:|Inputs:|Outputs:)",
        r"(?P<header>^=====.*=====$)",
        r"(?P<accepted>\*\*\*Accepted\*\*\*)",
        r"(?P<rejected>\*\*\*rejected\*\*\*|rejected \([^)]*\))",
    ]


IR_HIGHLIGHTER = IrHighlighter()


def ir_text(text: str) -> Text:
    """The text unchanged but for one final newline (the console ends each print with
    one), its names and keywords styled."""
    return IR_HIGHLIGHTER(Text(text[:-1] if text.endswith("\n") else text))


def code_text(code: str, lexer: str = "cuda") -> Text:
    """Source code highlighted by Pygments, as a Text that prints without padding."""
    text = Syntax(code, lexer, theme="monokai", background_color="default").highlight(code)
    text.rstrip()
    return text


def make_console(out: TextIO, color: bool | None = None, width: int | None = None) -> Console:
    """A console on `out`: colour when `out` is a terminal (or `color=True`), plain text
    when it is not, with NO_COLOR, or with `color=False`."""
    no_color = color is False or (color is None and "NO_COLOR" in os.environ)
    terminal = color if color is not None else None
    return Console(
        file=out,
        force_terminal=terminal,
        no_color=no_color,
        color_system=None if no_color else "auto",
        theme=THEME,
        width=width or (None if out.isatty() else 160),
        highlight=False,
        soft_wrap=True,
    )


def rule(title: str) -> Rule:
    """A bold left-aligned section rule. The title is given as markup, not a Text:
    Rich's Rule truncates a Text title in place, so a renderable drawn once narrow would
    keep its cut title when drawn again wider."""
    return Rule(f"[bold]{escape(title)}[/bold]", align="left")
