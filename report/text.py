"""Text a kernel controls (its exception messages, its name), made safe where the suite shows it.

A kernel is untrusted code, and so is what it says.  On a terminal, its
control characters would act: ``\\x1b[2J`` clears the screen, ``\\x1b[31m``
colours what follows, ``\\r`` overwrites the line (``ALL PASSED`` over a
failure).  In Markdown, its ``<img onerror=...>`` would be HTML and its
``**``, ``[link](...)``, backticks and pipes would be markup.  Each function
here gives the text that shows the kernel's characters as characters.
"""

from __future__ import annotations

import html
import re

# C0 but tab and newline, DEL, and C1: ESC (every escape sequence starts with it), CSI (0x9b), \r among them.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# What Markdown reads as markup inside a line: escapes, code, emphasis, links and images, table cells,
# strikethrough, a heading's closing hashes.  An underscore between two letters or digits opens and closes no
# emphasis: kernel names keep theirs unescaped (full_softmax).
MARKUP = re.compile(r"[\\`*\[\]|~#]|(?<![^\W_])_|_(?![^\W_])")
# What would open a block (a list, nested in the item the text follows) at the start of a line: "-", "+", "1.".
BLOCK_START = re.compile(r"^(\d*)([-+.)])")
BACKTICKS = re.compile(r"`+")


def printable(text: str) -> str:
    """``text`` with each control character a terminal acts on written out as Python writes it (``\\x1b``,
    ``\\r``): shown, not obeyed.  Newlines and tabs stay."""
    return CONTROL.sub(lambda match: repr(match.group())[1:-1], text)


def one_line(text: str) -> str:
    """``text`` printable, on one line: a newline inside a Markdown list item or table would end it."""
    return printable(text).replace("\n", " ")


def markdown_text(text: str) -> str:
    """``text`` as Markdown that renders it literally, on one line: HTML's ``<``, ``>`` and ``&`` as entities,
    markup characters and a leading list marker backslash-escaped."""
    escaped = MARKUP.sub(r"\\\g<0>", html.escape(" ".join(one_line(text).split()), quote=False))
    return BLOCK_START.sub(r"\1\\\2", escaped)


def markdown_code(text: str) -> str:
    """``text`` as a Markdown code span, on one line: rendered as is (HTML and markup inside a code span are text,
    and a command stays copyable), between backtick runs longer than any inside it."""
    text = one_line(text)
    fence = "`" * (longest_backticks(text) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""  # a span's content may not touch its fence
    return f"{fence}{pad}{text}{pad}{fence}"


def markdown_block(lines: list[str]) -> list[str]:
    """``lines`` as a fenced Markdown code block, printable, its fence longer than any backtick run in them."""
    lines = [printable(line) for line in lines]
    fence = "`" * max(3, 1 + max(map(longest_backticks, lines), default=0))
    return [fence, *lines, fence]


def longest_backticks(text: str) -> int:
    return max(map(len, BACKTICKS.findall(text)), default=0)
