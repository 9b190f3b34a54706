"""A Rich table that never cuts a value.

Rich fits a wide table into the terminal by shrinking its widest columns, and a value
with no space to wrap at ("regression", "33,554,432", a run label) is then cut to
"regressi…": the very value a reader needs next. This table lays itself out in three
steps instead, decided by measuring its cells:

1. every column at its widest fits: Rich's own layout;
2. every column at its narrowest fits (its longest word, or its whole value where the
   column does not wrap): each column gets at least that, the space left is shared in
   proportion to what each column could still use, and text wraps only between words;
3. not even that fits: each row is stacked, its first cell on a line and its other cells
   as `header: value` items packed into the lines under it, so a value is never cut, only
   moved down.

cli/ builds every table with it (`from wsperf.cli.table import Table`).
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

from rich import table as rich_table
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.text import Text


_SHORT = 14  # a column at most this wide (padding included) is kept unwrapped where it can be


class Table(rich_table.Table):
    """rich.table.Table that wraps or stacks instead of cutting (module docstring)."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not self.columns or self.width is not None:
            yield from super().__rich_console__(console, options)
            return
        avail = options.max_width - self._extra_width
        ranges = self._column_ranges(console, options)
        if sum(hi for _, hi in ranges) <= avail:
            yield from super().__rich_console__(console, options)
            return
        # a short value ("19.405 ms", "regression") is kept on one line while the long ones
        # wrap, and is split between its words only when that is the only way to fit
        whole = [(hi, hi) if hi <= _SHORT else (lo, hi) for lo, hi in ranges]
        for rs in (whole, ranges):
            if sum(lo for lo, _ in rs) <= avail:
                yield from self._fixed(self._share(rs, avail)).__rich_console__(console, options)
                return
        yield from self._stacked(console, options)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        # the stacked form fits any width: a container asking how narrow this table can go
        # (a Panel, a Columns) must not cut it either
        m = super().__rich_measure__(console, options)
        return Measurement(min(m.minimum, options.max_width), m.maximum)

    def _column_ranges(self, console: Console, options: ConsoleOptions) -> list[tuple[int, int]]:
        """(narrowest, widest) of each column with its padding: a column that does not wrap
        is as wide as its widest cell at both ends."""
        out = []
        for column in self.columns:
            m = self._measure_column(console, options.update_width(1 << 16), column)
            out.append((m.maximum if column.no_wrap else m.minimum, m.maximum))
        return out

    @staticmethod
    def _share(ranges: list[tuple[int, int]], avail: int) -> list[int]:
        """Widths from each column's narrowest, the space left shared by what each can use."""
        widths = [lo for lo, _ in ranges]
        spare = avail - sum(widths)
        wants = [hi - lo for lo, hi in ranges]
        total = sum(wants)
        if total and spare > 0:
            gains = [spare * w // total for w in wants]
            widths = [w + g for w, g in zip(widths, gains)]
            left = spare - sum(gains)
            for i in sorted(range(len(widths)), key=lambda i: wants[i] - gains[i], reverse=True):
                if left <= 0:
                    break
                if widths[i] < ranges[i][1]:
                    widths[i] += 1
                    left -= 1
        return widths

    def _fixed(self, widths: list[int]) -> rich_table.Table:
        """A plain Rich table of these column widths (padding included): nothing to collapse."""
        t = rich_table.Table.__new__(rich_table.Table)
        t.__dict__.update(self.__dict__)
        t.columns = [dataclasses.replace(c, width=max(1, w - self._get_padding_width(c._index)),
                                         min_width=None, max_width=None, overflow="fold")
                     for c, w in zip(self.columns, widths)]
        return t

    def _stacked(self, console: Console, options: ConsoleOptions) -> Iterable:
        """Each row as its first cell, then its other cells as `header: value`, packed into
        indented lines as many as fit; an item wider than a line wraps between its words."""
        width = options.max_width
        if self.title:
            yield Text.assemble(_text(console, self.title), style=self.title_style or "table.title")
        headers = [_text(console, c.header).plain.strip() for c in self.columns]
        cells = [list(c.cells) for c in self.columns]
        for r in range(max((len(c) for c in cells), default=0)):
            row = [_text(console, col[r]) if r < len(col) else Text() for col in cells]
            yield Text.assemble(row[0], style="bold", overflow="fold")
            line = Text("  ", overflow="fold")
            for h, v in zip(headers[1:], row[1:]):
                if not v.plain.strip():
                    continue
                item = Text.assemble((f"{h}: ", "dim") if h else "", v)
                if len(line) > 2 and len(line) + 3 + len(item) > width:
                    yield line
                    line = Text("  ", overflow="fold")
                if len(line) > 2:
                    line.append("   ")
                line.append_text(item)
            if len(line) > 2:
                yield line
        if self.caption:
            yield _text(console, self.caption)


def _text(console: Console, cell: object) -> Text:
    """A cell as Text, a str read as the table would read it (the console's markup setting)."""
    if isinstance(cell, Text):
        return cell.copy()
    return console.render_str(cell if isinstance(cell, str) else str(cell))
