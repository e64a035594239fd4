#!/usr/bin/env python3
"""Renders dockyard HTML reports in headless Chromium and checks each screenshot.

  tools/html_screenshots.py OUT_DIR REPORT.html [REPORT.html ...]

For every report: a screenshot OUT_DIR/<name>.png (1100 px wide), then the checks: the page
logged nothing to the console (no script errors), and the screenshot is not blank (at least 1%
of its pixels are not white and it has at least 8 distinct colours). Prints one line per report
and exits 0 when all pass, 1 when one fails, 77 when no browser is installed (chromium,
chromium-browser or google-chrome on PATH): the caller reports that as skipped.
Offline: the pages fetch nothing, and Chromium is started with networking features off.
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib


def find_browser():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def decode_png(path, max_rows):
    """Returns (width, height, channels, rows of bytes) of an 8-bit RGB or RGBA PNG: its first
    max_rows rows (rows are unfiltered one after the other; pure Python, so a few per page)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG")
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            if depth != 8 or colour not in (2, 6):
                raise ValueError(f"{path}: unsupported PNG (bit depth {depth}, colour type {colour})")
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(min(height, max_rows)):
        filt = raw[i]
        line = bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride if filt else 0):
            a = line[x - channels] if x >= channels else 0
            b = prev[x]
            c = prev[x - channels] if x >= channels else 0
            if filt == 1:
                line[x] = (line[x] + a) & 255
            elif filt == 2:
                line[x] = (line[x] + b) & 255
            elif filt == 3:
                line[x] = (line[x] + ((a + b) >> 1)) & 255
            elif filt == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, channels, rows


def blank_stats(path):
    """(fraction of non-white pixels, distinct colours) of the page's top 1,500 rows (header and
    first figures), sampled on every 2nd row and column."""
    width, height, channels, rows = decode_png(path, 1500)
    coloured, total, colours = 0, 0, set()
    for y in range(0, len(rows), 2):
        row = rows[y]
        for x in range(0, width, 2):
            px = row[x * channels:x * channels + 3]
            total += 1
            if min(px) < 245:
                coloured += 1
            if len(colours) < 4096:
                colours.add(px)
    return coloured / max(total, 1), len(colours)


def shoot(browser, html, png, height):
    with tempfile.TemporaryDirectory() as profile:
        env = dict(os.environ, HOME=profile)
        cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
               "--disable-extensions", "--disable-background-networking", "--disable-sync",
               "--enable-logging=stderr", "--v=0", f"--user-data-dir={profile}", f"--window-size=1100,{height}",
               f"--screenshot={png}", "file://" + os.path.abspath(html)]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=120, text=True,
                              errors="replace")
    console = [line for line in (proc.stdout + proc.stderr).splitlines() if ":CONSOLE" in line]
    return proc.returncode, console


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    browser = find_browser()
    if not browser:
        print("SKIPPED: no chromium, chromium-browser or google-chrome on PATH")
        return 77
    out_dir = argv[1]
    os.makedirs(out_dir, exist_ok=True)
    height = int(os.environ.get("SCREENSHOT_HEIGHT", "4200"))
    failed = 0
    for html in argv[2:]:
        png = os.path.join(out_dir, os.path.splitext(os.path.basename(html))[0] + ".png")
        code, console = shoot(browser, html, png, height)
        problems = []
        if code != 0 or not os.path.exists(png):
            problems.append(f"chromium exit {code}, no screenshot")
        else:
            fraction, colours = blank_stats(png)
            if fraction < 0.01 or colours < 8:
                problems.append(f"blank page: {fraction:.2%} non-white pixels, {colours} colours")
        problems += [f"console: {line}" for line in console]
        if problems:
            failed += 1
            print(f"FAIL {html}: " + "; ".join(problems))
        else:
            print(f"ok   {html} -> {png} ({fraction:.1%} non-white pixels, {colours} colours, no console output)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
