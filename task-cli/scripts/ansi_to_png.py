#!/usr/bin/env python3
"""Renders a terminal screen captured with colours (`tmux capture-pane -e -p`) to a PNG.

Usage: ansi_to_png.py SCREEN.ansi OUT.png [COLUMNS ROWS]

Understands the SGR sequences tmux emits: reset, bold, reverse, the 8/16 colours, 256 colours
and 24-bit colours (foreground and background). Needs Pillow and DejaVu Sans Mono.
"""
import re
import sys

from PIL import Image, ImageDraw, ImageFont

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"
BOLD = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono-Bold.ttf"
SIZE = 16
FG, BG = (220, 220, 220), (24, 24, 28)
BASIC = [
    (0, 0, 0), (205, 49, 49), (13, 188, 121), (229, 229, 16),
    (36, 114, 200), (188, 63, 188), (17, 168, 205), (229, 229, 229),
    (102, 102, 102), (241, 76, 76), (35, 209, 139), (245, 245, 67),
    (59, 142, 234), (214, 112, 214), (41, 184, 219), (255, 255, 255),
]


def color256(n):
    if n < 16:
        return BASIC[n]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return (steps[n // 36], steps[n // 6 % 6], steps[n % 6])
    level = 8 + (n - 232) * 10
    return (level, level, level)


def apply_sgr(params, style):
    codes = [int(p) if p else 0 for p in params.split(";")] if params else [0]
    i = 0
    while i < len(codes):
        c = codes[i]
        if c == 0:
            style.update(fg=None, bg=None, bold=False, reverse=False)
        elif c == 1:
            style["bold"] = True
        elif c == 22:
            style["bold"] = False
        elif c == 7:
            style["reverse"] = True
        elif c == 27:
            style["reverse"] = False
        elif 30 <= c <= 37:
            style["fg"] = BASIC[c - 30]
        elif 90 <= c <= 97:
            style["fg"] = BASIC[c - 90 + 8]
        elif 40 <= c <= 47:
            style["bg"] = BASIC[c - 40]
        elif 100 <= c <= 107:
            style["bg"] = BASIC[c - 100 + 8]
        elif c == 39:
            style["fg"] = None
        elif c == 49:
            style["bg"] = None
        elif c in (38, 48) and i + 1 < len(codes):
            key = "fg" if c == 38 else "bg"
            if codes[i + 1] == 5 and i + 2 < len(codes):
                style[key] = color256(codes[i + 2])
                i += 2
            elif codes[i + 1] == 2 and i + 4 < len(codes):
                style[key] = tuple(codes[i + 2:i + 5])
                i += 4
        i += 1


def cells(text, columns, rows):
    """The screen as rows of (char, style) cells."""
    style = {"fg": None, "bg": None, "bold": False, "reverse": False}
    screen = []
    for line in text.split("\n")[:rows]:
        row = []
        for part in re.split(r"(\x1b\[[0-9;]*m)", line):
            match = re.fullmatch(r"\x1b\[([0-9;]*)m", part)
            if match:
                apply_sgr(match.group(1), style)
                continue
            for ch in part:
                row.append((ch, dict(style)))
        screen.append(row[:columns])
    return screen


def main():
    source, out = sys.argv[1], sys.argv[2]
    columns = int(sys.argv[3]) if len(sys.argv) > 3 else 80
    rows = int(sys.argv[4]) if len(sys.argv) > 4 else 24
    font, bold = ImageFont.truetype(FONT, SIZE), ImageFont.truetype(BOLD, SIZE)
    left, top, right, bottom = font.getbbox("M")
    width, height = font.getlength("M"), SIZE + 4
    pad = 12
    image = Image.new("RGB", (int(columns * width) + 2 * pad, rows * height + 2 * pad), BG)
    draw = ImageDraw.Draw(image)
    with open(source, encoding="utf-8", errors="replace") as f:
        screen = cells(f.read(), columns, rows)
    for y, row in enumerate(screen):
        for x, (ch, style) in enumerate(row):
            fg, bg = style["fg"] or FG, style["bg"]
            if style["reverse"]:
                fg, bg = (bg or BG), (style["fg"] or FG)
            px, py = pad + x * width, pad + y * height
            if bg:
                draw.rectangle([px, py, px + width, py + height], fill=bg)
            if ch != " ":
                draw.text((px, py + 1), ch, font=bold if style["bold"] else font, fill=fg)
    image.save(out)


if __name__ == "__main__":
    main()
