#!/usr/bin/env python3
"""Draws the scale curve (issue 44) from what scale.sh wrote.

    python3 scale-plot.py scale      # reads scale/model.txt, scale/engine-*.txt

Writes scale/scale.png: one panel per workload, cost per object (or per
operation) against the number of objects, both axes logarithmic; and
prints the tables as markdown. Only the standard library: the PNG is
encoded here (zlib), and text uses a 5x7 bitmap font defined below.
"""
import math
import os
import re
import struct
import sys
import zlib

# --- a 5x7 font, capitals, digits and a little punctuation ----------------
GLYPHS = {
    "A": ["01110", "10001", "10001", "11111", "10001", "10001", "10001"],
    "B": ["11110", "10001", "10001", "11110", "10001", "10001", "11110"],
    "C": ["01110", "10001", "10000", "10000", "10000", "10001", "01110"],
    "D": ["11110", "10001", "10001", "10001", "10001", "10001", "11110"],
    "E": ["11111", "10000", "10000", "11110", "10000", "10000", "11111"],
    "F": ["11111", "10000", "10000", "11110", "10000", "10000", "10000"],
    "G": ["01110", "10001", "10000", "10111", "10001", "10001", "01111"],
    "H": ["10001", "10001", "10001", "11111", "10001", "10001", "10001"],
    "I": ["01110", "00100", "00100", "00100", "00100", "00100", "01110"],
    "J": ["00111", "00010", "00010", "00010", "00010", "10010", "01100"],
    "K": ["10001", "10010", "10100", "11000", "10100", "10010", "10001"],
    "L": ["10000", "10000", "10000", "10000", "10000", "10000", "11111"],
    "M": ["10001", "11011", "10101", "10101", "10001", "10001", "10001"],
    "N": ["10001", "10001", "11001", "10101", "10011", "10001", "10001"],
    "O": ["01110", "10001", "10001", "10001", "10001", "10001", "01110"],
    "P": ["11110", "10001", "10001", "11110", "10000", "10000", "10000"],
    "Q": ["01110", "10001", "10001", "10001", "10101", "10010", "01101"],
    "R": ["11110", "10001", "10001", "11110", "10100", "10010", "10001"],
    "S": ["01111", "10000", "10000", "01110", "00001", "00001", "11110"],
    "T": ["11111", "00100", "00100", "00100", "00100", "00100", "00100"],
    "U": ["10001", "10001", "10001", "10001", "10001", "10001", "01110"],
    "V": ["10001", "10001", "10001", "10001", "10001", "01010", "00100"],
    "W": ["10001", "10001", "10001", "10101", "10101", "10101", "01010"],
    "X": ["10001", "10001", "01010", "00100", "01010", "10001", "10001"],
    "Y": ["10001", "10001", "01010", "00100", "00100", "00100", "00100"],
    "Z": ["11111", "00001", "00010", "00100", "01000", "10000", "11111"],
    "0": ["01110", "10001", "10011", "10101", "11001", "10001", "01110"],
    "1": ["00100", "01100", "00100", "00100", "00100", "00100", "01110"],
    "2": ["01110", "10001", "00001", "00010", "00100", "01000", "11111"],
    "3": ["11111", "00010", "00100", "00010", "00001", "10001", "01110"],
    "4": ["00010", "00110", "01010", "10010", "11111", "00010", "00010"],
    "5": ["11111", "10000", "11110", "00001", "00001", "10001", "01110"],
    "6": ["00110", "01000", "10000", "11110", "10001", "10001", "01110"],
    "7": ["11111", "00001", "00010", "00100", "01000", "01000", "01000"],
    "8": ["01110", "10001", "10001", "01110", "10001", "10001", "01110"],
    "9": ["01110", "10001", "10001", "01111", "00001", "00010", "01100"],
    ".": ["00000", "00000", "00000", "00000", "00000", "01100", "01100"],
    ",": ["00000", "00000", "00000", "00000", "01100", "00100", "01000"],
    "-": ["00000", "00000", "00000", "11111", "00000", "00000", "00000"],
    "/": ["00001", "00001", "00010", "00100", "01000", "10000", "10000"],
    "%": ["11001", "11001", "00010", "00100", "01000", "10011", "10011"],
    "(": ["00010", "00100", "01000", "01000", "01000", "00100", "00010"],
    ")": ["01000", "00100", "00010", "00010", "00010", "00100", "01000"],
    ":": ["00000", "01100", "01100", "00000", "01100", "01100", "00000"],
    "=": ["00000", "00000", "11111", "00000", "11111", "00000", "00000"],
    " ": ["00000"] * 7,
}

WHITE = (255, 255, 255)
BLACK = (0, 0, 0)
GRID = (225, 225, 225)
AXIS = (90, 90, 90)
COLORS = {
    "STRATA": (31, 119, 180),
    "GRDB": (255, 127, 14),
    "SQLITE": (255, 127, 14),
    "LMDB": (44, 160, 44),
}


class Canvas:
    def __init__(self, width, height):
        self.width, self.height = width, height
        self.pixels = bytearray(WHITE * (width * height))

    def dot(self, x, y, color):
        x, y = int(round(x)), int(round(y))
        if 0 <= x < self.width and 0 <= y < self.height:
            i = 3 * (y * self.width + x)
            self.pixels[i:i + 3] = bytes(color)

    def rect(self, x0, y0, x1, y1, color):
        for y in range(int(y0), int(y1) + 1):
            for x in range(int(x0), int(x1) + 1):
                self.dot(x, y, color)

    def line(self, x0, y0, x1, y1, color, width=1):
        steps = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
        for s in range(steps + 1):
            t = s / steps
            x, y = x0 + (x1 - x0) * t, y0 + (y1 - y0) * t
            for dx in range(-(width // 2), width - width // 2):
                for dy in range(-(width // 2), width - width // 2):
                    self.dot(x + dx, y + dy, color)

    def text(self, x, y, string, color=BLACK, scale=1):
        for ch in string.upper():
            glyph = GLYPHS.get(ch, GLYPHS[" "])
            for row, bits in enumerate(glyph):
                for col, bit in enumerate(bits):
                    if bit == "1":
                        self.rect(x + col * scale, y + row * scale, x + col * scale + scale - 1,
                                  y + row * scale + scale - 1, color)
            x += 6 * scale

    @staticmethod
    def text_width(string, scale=1):
        return 6 * scale * len(string)

    def png(self):
        raw = b"".join(b"\x00" + bytes(self.pixels[3 * y * self.width:3 * (y + 1) * self.width])
                       for y in range(self.height))

        def chunk(kind, data):
            body = kind + data
            return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")


def size_label(n):
    for unit, div in (("M", 1_000_000), ("K", 1_000)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return str(n)


def value_label(v):
    if v >= 1:
        return f"{v:g}"
    return f"{v:.2g}"


def panel(canvas, x, y, w, h, title, series, unit):
    """One workload: `series` maps a name to [(n, value)]."""
    points = [p for values in series.values() for p in values if p[1] > 0]
    if not points:
        return
    xs = sorted({n for n, _ in points})
    lo = min(v for _, v in points)
    hi = max(v for _, v in points)
    y_lo = 10 ** math.floor(math.log10(lo))
    y_hi = 10 ** math.ceil(math.log10(hi))
    if y_hi <= y_lo:
        y_hi = y_lo * 10
    x_lo, x_hi = math.log10(xs[0]), math.log10(xs[-1]) if len(xs) > 1 else math.log10(xs[0]) + 1
    left, top, right, bottom = x + 48, y + 22, x + w - 22, y + h - 30

    def px(n):
        return left + (math.log10(n) - x_lo) / (x_hi - x_lo) * (right - left)

    def py(v):
        return bottom - (math.log10(v) - math.log10(y_lo)) / (math.log10(y_hi) - math.log10(y_lo)) * (bottom - top)

    canvas.text(x + 8, y + 4, title, BLACK, 2 if Canvas.text_width(title, 2) < w - 16 else 1)
    decade = y_lo
    while decade <= y_hi * 1.0001:
        canvas.line(left, py(decade), right, py(decade), GRID)
        label = value_label(decade)
        canvas.text(left - 4 - Canvas.text_width(label), py(decade) - 3, label, AXIS)
        decade *= 10
    for n in xs:
        canvas.line(px(n), top, px(n), bottom, GRID)
        label = size_label(n)
        canvas.text(px(n) - Canvas.text_width(label) / 2, bottom + 6, label, AXIS)
    canvas.line(left, bottom, right, bottom, AXIS)
    canvas.line(left, top, left, bottom, AXIS)
    canvas.text(left, bottom + 17, unit, AXIS)
    for name, values in series.items():
        color = COLORS.get(name.upper(), (120, 120, 120))
        values = sorted(p for p in values if p[1] > 0)
        for (n0, v0), (n1, v1) in zip(values, values[1:]):
            canvas.line(px(n0), py(v0), px(n1), py(v1), color, 2)
        for n, v in values:
            canvas.rect(px(n) - 2, py(v) - 2, px(n) + 2, py(v) + 2, color)


MODEL_WORKLOADS = [
    ("insert", "INSERT (SAVES OF 10K)", "US PER OBJECT"),
    ("by_id", "FETCH BY ID, FIRST TOUCH", "US PER FETCH"),
    ("by_id_warm", "FETCH BY ID, AGAIN", "US PER FETCH"),
    ("by_unique", "FETCH BY UNIQUE", "US PER FETCH"),
    ("range", "INDEXED RANGE", "US PER OBJECT"),
    ("update", "FETCH-MODIFY-SAVE 1%", "US PER OBJECT"),
    ("enumerate", "ENUMERATE ALL", "US PER OBJECT"),
    ("single", "ONE DURABLE SAVE", "US PER SAVE"),
    ("bytes", "FILE SIZE", "BYTES PER OBJECT"),
    ("peak_mib", "PEAK RSS", "MIB"),
    ("anon_mib", "PEAK HEAP (ANON RSS)", "MIB"),
    ("file_mib", "PEAK MAPPED FILE RSS", "MIB"),
]


def read_scale_lines(path, rows):
    """Adds the `scale SIDE N key=value ...` lines of the file at `path`
    (model-bench's, or those in an engine-bench report) to `rows`."""
    if not os.path.exists(path):
        return rows
    for line in open(path):
        parts = line.split()
        if len(parts) < 4 or parts[0] != "scale":
            continue
        rows[(parts[1], int(parts[2]))] = {k: float(v) for k, v in (p.split("=", 1) for p in parts[3:])}
    return rows


def read_engine(directory):
    """scale/engine-N.txt: engine-bench's reports, one per size."""
    rows = {}
    for name in sorted(os.listdir(directory)):
        if re.match(r"engine-(\d+)\.txt$", name):
            read_scale_lines(os.path.join(directory, name), rows)
    return rows


ENGINE_WORKLOADS = [
    ("load", "ENGINE: BULK LOAD", "US PER ENTRY"),
    ("read", "ENGINE: POINT READS", "US PER READ"),
    ("scan", "ENGINE: ORDERED SCAN", "US PER ENTRY"),
    ("commit", "ENGINE: DURABLE COMMIT", "US PER COMMIT"),
    ("delete", "ENGINE: RANDOM DELETES", "US PER DELETE"),
]


def table(rows, workloads, sides):
    sizes = sorted({n for _, n in rows})
    out = []
    for key, title, unit in workloads:
        out.append(f"\n{title.lower()} ({unit.lower()})\n")
        out.append("| objects | " + " | ".join(sides) + f" | {sides[1]} / {sides[0]} |")
        out.append("|---|" + "---|" * (len(sides) + 1))
        for n in sizes:
            cells = [rows.get((s, n), {}).get(key) for s in sides]
            text = [("%.3f" % c) if c is not None else "" for c in cells]
            ratio = "%.2f×" % (cells[1] / cells[0]) if cells[0] and cells[1] else ""
            out.append(f"| {n:,} | " + " | ".join(text) + f" | {ratio} |")
    return "\n".join(out)


def growth(rows, workloads, sides, small=1_000_000, large=10_000_000):
    """Each side's cost at `large` as a multiple of its cost at `small`."""
    head = " | ".join(f"{side} {size_label(small)} | {side} {size_label(large)} | ×" for side in sides)
    out = [f"| workload | {head} |", "|---|" + "---|" * (3 * len(sides))]
    for key, title, _ in workloads:
        cells = []
        for side in sides:
            a = rows.get((side, small), {}).get(key)
            b = rows.get((side, large), {}).get(key)
            cells += ["%.3f" % a if a is not None else "", "%.3f" % b if b is not None else "",
                      "%.2f×" % (b / a) if a and b else ""]
        out.append(f"| {title.lower()} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main():
    directory = sys.argv[1] if len(sys.argv) > 1 else "scale"
    model = read_scale_lines(os.path.join(directory, "model.txt"), {})
    engine = read_engine(directory)
    panels = []
    for key, title, unit in MODEL_WORKLOADS:
        series = {side.upper(): [(n, v[key]) for (s, n), v in model.items() if s == side and key in v]
                  for side in ("strata", "grdb")}
        panels.append((title, series, unit))
    for key, title, unit in ENGINE_WORKLOADS:
        series = {e.upper(): [(n, v[key]) for (s, n), v in engine.items() if s == e and key in v]
                  for e in ("strata", "lmdb", "sqlite")}
        if any(series.values()):
            panels.append((title, series, unit))
    columns, w, h = 3, 330, 230
    rows = (len(panels) + columns - 1) // columns
    canvas = Canvas(columns * w, rows * h + 30)
    canvas.text(10, 8, "STRATA", COLORS["STRATA"], 2)
    canvas.text(100, 8, "GRDB / SQLITE", COLORS["GRDB"], 2)
    canvas.text(270, 8, "LMDB", COLORS["LMDB"], 2)
    canvas.text(340, 8, "LOWER IS FASTER", AXIS, 2)
    for i, (title, series, unit) in enumerate(panels):
        panel(canvas, (i % columns) * w, 30 + (i // columns) * h, w, h, title, series, unit)
    with open(os.path.join(directory, "scale.png"), "wb") as f:
        f.write(canvas.png())
    print(table(model, MODEL_WORKLOADS, ["strata", "grdb"]))
    if engine:
        print(table(engine, ENGINE_WORKLOADS, ["strata", "lmdb", "sqlite"]))
    print("\nfrom 1M to 10M objects (cost per object at 10M as a multiple of its cost at 1M)\n")
    print(growth(model, MODEL_WORKLOADS[:8], ["strata", "grdb"]))
    if engine:
        print()
        print(growth(engine, ENGINE_WORKLOADS, ["strata", "lmdb", "sqlite"]))


if __name__ == "__main__":
    main()
