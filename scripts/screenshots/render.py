#!/usr/bin/env python3
"""Renders a terminal screen captured with its colours (`tmux capture-pane -e -p`) to a PNG.

Usage: render.py SCREEN.ansi OUT.png COLUMNS ROWS

The capture is fed to pyte, a terminal emulator, at COLUMNS x ROWS; each cell of pyte's screen
buffer (character, foreground, background, bold, reverse) is drawn with DejaVu Sans Mono by
Pillow. The image is saved with an adaptive palette (text on a few colours compresses well).
Needs `pyte` and `Pillow` (scripts/screenshots/top.sh installs them in a venv) and the font
(Debian: fonts-dejavu-core).
"""
import sys

import pyte
from PIL import Image, ImageDraw, ImageFont

FONTS = "/usr/share/fonts/truetype/dejavu/"
REGULAR, BOLD = FONTS + "DejaVuSansMono.ttf", FONTS + "DejaVuSansMono-Bold.ttf"
SIZE = 15
LINE_HEIGHT = SIZE + 4
PAD = 10
FOREGROUND, BACKGROUND = (216, 218, 222), (26, 27, 33)
# pyte's colour names for SGR 30-37 / 90-97, as a dark terminal theme shows them.
NAMED = {
    "black": (40, 42, 54),
    "red": (224, 86, 86),
    "green": (80, 200, 120),
    "brown": (230, 200, 70),  # pyte's name for yellow (SGR 33)
    "yellow": (230, 200, 70),
    "blue": (90, 150, 240),
    "magenta": (200, 120, 220),
    "cyan": (80, 200, 220),
    "white": (216, 218, 222),
    "brightblack": (110, 112, 124),
    "brightred": (255, 110, 110),
    "brightgreen": (110, 230, 150),
    "brightbrown": (255, 230, 100),
    "brightyellow": (255, 230, 100),
    "brightblue": (120, 175, 255),
    "brightmagenta": (230, 150, 240),
    "brightcyan": (110, 225, 240),
    "brightwhite": (255, 255, 255),
}


def rgb(colour, default):
    """pyte's colour (a name, 'default', or six hex digits for 256 and 24-bit colours)."""
    if colour == "default":
        return default
    if colour in NAMED:
        return NAMED[colour]
    try:
        return tuple(int(colour[i:i + 2], 16) for i in (0, 2, 4))
    except ValueError:
        return default


def emulate(capture, columns, rows):
    """The capture played on a pyte screen of that size."""
    screen = pyte.Screen(columns, rows)
    stream = pyte.Stream(screen)
    lines = capture.rstrip("\n").split("\n")[:rows]
    # Each captured row starts at column 0 with the default style (tmux ends rows mid-style).
    stream.feed("\r\n".join(line + "\x1b[0m" for line in lines))
    return screen


def render(screen, columns, rows, out):
    regular, bold = ImageFont.truetype(REGULAR, SIZE), ImageFont.truetype(BOLD, SIZE)
    width = regular.getlength("M")
    image = Image.new(
        "RGB", (round(columns * width) + 2 * PAD, rows * LINE_HEIGHT + 2 * PAD), BACKGROUND
    )
    draw = ImageDraw.Draw(image)
    for y in range(rows):
        line = screen.buffer[y]
        for x in range(columns):
            cell = line[x]
            fg, bg = rgb(cell.fg, FOREGROUND), rgb(cell.bg, None)
            if cell.reverse:
                fg, bg = bg or BACKGROUND, fg
            left, top = PAD + x * width, PAD + y * LINE_HEIGHT
            if bg is not None:
                draw.rectangle([left, top, left + width, top + LINE_HEIGHT], fill=bg)
            if cell.data.strip():
                font = bold if cell.bold else regular
                draw.text((left, top + 2), cell.data, font=font, fill=fg)
    image.convert("P", palette=Image.Palette.ADAPTIVE, colors=96).save(out, optimize=True)


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    source, out, columns, rows = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    with open(source, encoding="utf-8", errors="replace") as f:
        screen = emulate(f.read(), columns, rows)
    render(screen, columns, rows, out)


if __name__ == "__main__":
    main()
