"""A scrollable view of rich renderables, rendered once into lines (as toolong and
RichLog do) so that long IR and CUDA scroll cheaply, and searchable: every match is
marked and the view jumps from one to the next."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass

from rich.console import Console, RenderableType
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.events import Resize
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from workbench.render.text import THEME

MATCH = Style(color="black", bgcolor="yellow")
CURRENT = Style(color="black", bgcolor="bright_red", bold=True)
MIN_WIDTH = 60


def render_strips(renderable: RenderableType, width: int) -> list[Strip]:
    """The renderable as lines of `width` cells (long IR lines are kept whole: the view
    scrolls sideways), styled with the workbench's theme."""
    console = Console(
        file=io.StringIO(),
        width=width,
        theme=THEME,
        force_terminal=True,
        color_system="truecolor",
        highlight=False,
        legacy_windows=False,
    )
    options = console.options.update(width=width, no_wrap=True, overflow="ignore")
    lines = list(Segment.split_lines(console.render(renderable, options)))
    return [Strip(line) for line in lines]


@dataclass(frozen=True)
class Match:
    line: int
    start: int  # cells
    end: int


def find_matches(strips: list[Strip], query: str) -> list[Match]:
    if not query:
        return []
    pattern = re.compile(re.escape(query), re.IGNORECASE)
    found = []
    for y, strip in enumerate(strips):
        text = strip.text
        for m in pattern.finditer(text):
            found.append(Match(y, strip.index_to_cell_position(m.start()), strip.index_to_cell_position(m.end())))
    return found


def _restyle(strip: Strip, style: Style) -> Strip:
    segments = [Segment(s.text, (s.style or Style()) + style, s.control) for s in strip]
    return Strip(segments, strip.cell_length)


def overlay(strip: Strip, spans: list[tuple[int, int, Style]]) -> Strip:
    """`strip` with each (start, end) cell span restyled on top of its own style."""
    pieces: list[Strip] = []
    at = 0
    for start, end, style in sorted(spans, key=lambda s: s[0]):
        if start < at:
            continue
        pieces += [strip.crop(at, start), _restyle(strip.crop(start, end), style)]
        at = end
    pieces.append(strip.crop(at))
    return Strip.join(pieces)


class TextView(ScrollView, can_focus=True):
    """Shows one renderable (or, for the log, a growing list of them)."""

    BINDINGS = [  # noqa: RUF012 (Textual's own API: a class attribute list)
        Binding("n", "next_match", "next match"),
        Binding("N", "previous_match", "previous match"),
        Binding("g", "scroll_home", "top", show=False),
        Binding("G", "scroll_end", "bottom", show=False),
    ]

    DEFAULT_CSS = """
    TextView { background: $surface; }
    TextView:focus { background-tint: $foreground 4%; }
    """

    class SearchResult(Message):
        """How many matches the view holds for the query, and which one is current."""

        def __init__(self, view: TextView, current: int, total: int) -> None:
            super().__init__()
            self.view = view
            self.current = current
            self.total = total

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._parts: list[RenderableType] = []
        self._strips: list[Strip] = []
        self._width = 0
        self._query = ""
        self._matches: list[Match] = []
        self._current = -1
        self._by_line: dict[int, list[int]] = {}
        self._rewrap_pending = False

    # -- content ---------------------------------------------------------------------------
    def show(self, renderable: RenderableType) -> None:
        self._parts = [renderable]
        self._rerender(keep_position=False)

    def append(self, renderable: RenderableType) -> None:
        self._parts.append(renderable)
        at_end = self.scroll_offset.y >= self.max_scroll_y
        self._width = self._width or self._render_width()
        self._strips += render_strips(renderable, self._width)
        self._update_size()
        self._rematch()
        if at_end:
            self.scroll_end(animate=False, immediate=False, x_axis=False)

    def _render_width(self) -> int:
        return max(self.scrollable_content_region.width, MIN_WIDTH)

    @property
    def plain(self) -> str:
        """The text on show, without styles (for search and for tests)."""
        return "\n".join(s.text.rstrip() for s in self._strips)

    def _rerender(self, keep_position: bool) -> None:
        width = self._width = self._render_width()
        self._strips = [s for part in self._parts for s in render_strips(part, width)]
        self._update_size()
        self._rematch()
        if not keep_position:
            self.scroll_to(0, 0, animate=False, immediate=True)

    def _update_size(self) -> None:
        widest = max((s.cell_length for s in self._strips), default=0)
        self.virtual_size = Size(max(widest, self._width), len(self._strips))
        self.refresh()

    def _rewrap(self) -> None:
        self._rewrap_pending = False
        if self._render_width() != self._width:
            self._rerender(keep_position=True)

    def on_resize(self, event: Resize) -> None:
        if self._render_width() != self._width and self._parts:
            self._rerender(keep_position=True)

    def on_mount(self) -> None:
        if self._parts and not self._strips:
            self._rerender(keep_position=False)

    def render_line(self, y: int) -> Strip:
        # The text was wrapped for another width than the view now has (it was shown
        # before its tab was laid out, or a scrollbar came or went without a resize):
        # wrap it again once this paint is done.
        if self._parts and not self._rewrap_pending and self._render_width() != self._width:
            self._rewrap_pending = True
            self.call_after_refresh(self._rewrap)
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.scrollable_content_region.width
        if index >= len(self._strips):
            return Strip.blank(width, self.rich_style)
        strip = self._strips[index]
        if index in self._by_line:
            spans = [self._span(i) for i in self._by_line[index]]
            strip = overlay(strip, spans)
        return strip.crop_extend(scroll_x, scroll_x + width, self.rich_style).apply_style(self.rich_style)

    def _span(self, i: int) -> tuple[int, int, Style]:
        m = self._matches[i]
        return m.start, m.end, CURRENT if i == self._current else MATCH

    # -- lines and search ------------------------------------------------------------------
    def scroll_to_line(self, line: int, center: bool = True) -> None:
        top = max(0, line - self.scrollable_content_region.height // 3) if center else line
        self.scroll_to(y=top, animate=False, immediate=True)

    def search(self, query: str) -> int:
        """Mark every match of `query` (case-insensitive) and jump to the first one at or
        after the top of the view; the number of matches."""
        self._query = query
        self._rematch()
        if self._matches:
            top = self.scroll_offset.y
            self._current = next((i for i, m in enumerate(self._matches) if m.line >= top), 0)
            self._jump()
        self._announce()
        return len(self._matches)

    def _rematch(self) -> None:
        self._matches = find_matches(self._strips, self._query)
        self._by_line = {}
        for i, m in enumerate(self._matches):
            self._by_line.setdefault(m.line, []).append(i)
        self._current = min(self._current, len(self._matches) - 1)
        self.refresh()

    def _jump(self) -> None:
        m = self._matches[self._current]
        self.scroll_to_line(m.line)
        width = self.scrollable_content_region.width
        if not self.scroll_offset.x <= m.start < self.scroll_offset.x + width:
            self.scroll_to(x=max(0, m.start - width // 3), animate=False, immediate=True)
        self.refresh()

    def _announce(self) -> None:
        self.post_message(self.SearchResult(self, self._current + 1 if self._matches else 0, len(self._matches)))

    def action_next_match(self) -> None:
        self._step(1)

    def action_previous_match(self) -> None:
        self._step(-1)

    def _step(self, by: int) -> None:
        if not self._matches:
            if self._query:
                self.notify(f"no match for {self._query!r}", severity="warning")
            return
        self._current = (self._current + by) % len(self._matches)
        self._jump()
        self._announce()

    @property
    def match_count(self) -> int:
        return len(self._matches)

    @property
    def current_match(self) -> Match | None:
        return self._matches[self._current] if self._matches and self._current >= 0 else None


def plain_lines(renderable: RenderableType, width: int = 160) -> list[str]:
    """The renderable as plain lines at `width` (what the view shows, for tests)."""
    return [s.text.rstrip() for s in render_strips(renderable, width)]
