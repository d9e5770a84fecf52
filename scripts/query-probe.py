#!/usr/bin/env python3
"""Ask the terminal this program runs in every query of docs/terminal.md and record the answers.

Usage: query-probe.py OUT.json [DONE_MARKER]

Run as the command of a terminal (a tmux pane, a maxx session, an xterm). Puts the tty in raw
mode, then for each query: discards pending input, writes the query, reads until the answer
is complete (it ends with its sequence's final byte / string terminator) or no byte arrived
for 300 ms (600 ms before the first byte), and records the bytes and the time to the first
byte. Writes OUT.json atomically, then prints DONE_MARKER (default PROBE-DONE) so a driver
can wait for it on the screen instead of sleeping.
"""

import json
import os
import select
import sys
import termios
import time
import tty

ESC = "\x1b"
ST = ESC + "\\"
BEL = "\x07"

QUERIES = [
    ("CPR (DSR 6)", ESC + "[6n"),
    ("DECXCPR", ESC + "[?6n"),
    ("DSR 5 status", ESC + "[5n"),
    ("DA1", ESC + "[c"),
    ("DA1 (0)", ESC + "[0c"),
    ("DA2", ESC + "[>c"),
    ("DA3", ESC + "[=c"),
    ("XTVERSION", ESC + "[>q"),
    ("DECRQM ?25 (cursor visible)", ESC + "[?25$p"),
    ("DECRQM ?1049 (alt screen)", ESC + "[?1049$p"),
    ("DECRQM ?2004 (bracketed paste)", ESC + "[?2004$p"),
    ("DECRQM ?2026 (synchronized output)", ESC + "[?2026$p"),
    ("DECRQM 4 (IRM, ANSI)", ESC + "[4$p"),
    ("DECRQSS SGR", ESC + "P$qm" + ST),
    ("DECRQSS DECSTBM", ESC + "P$qr" + ST),
    ("DECRQSS DECSCUSR", ESC + "P$q q" + ST),
    ("OSC 10 (fg)", ESC + "]10;?" + BEL),
    ("OSC 11 (bg)", ESC + "]11;?" + BEL),
    ("OSC 11 (bg, ST)", ESC + "]11;?" + ST),
    ("OSC 12 (cursor)", ESC + "]12;?" + BEL),
    ("OSC 4;1 (palette 1)", ESC + "]4;1;?" + BEL),
    ("OSC 4;196 (palette 196)", ESC + "]4;196;?" + BEL),
    ("XTWINOPS 14 (text area px)", ESC + "[14t"),
    ("XTWINOPS 16 (cell px)", ESC + "[16t"),
    ("XTWINOPS 18 (text area chars)", ESC + "[18t"),
    ("XTWINOPS 19 (screen chars)", ESC + "[19t"),
    ("XTGETTCAP TN", ESC + "P+q" + "TN".encode().hex() + ST),
    ("XTGETTCAP Co", ESC + "P+q" + "Co".encode().hex() + ST),
    ("XTGETTCAP RGB", ESC + "P+q" + "RGB".encode().hex() + ST),
    ("kitty keyboard query", ESC + "[?u"),
]


def complete(buf: bytes) -> bool:
    """True when buf holds at least one whole answer (CSI, DCS or OSC)."""
    if not buf.startswith(b"\x1b"):
        return False
    if buf.startswith(b"\x1b["):
        return any(0x40 <= b <= 0x7E for b in buf[2:])
    if buf.startswith(b"\x1bP") or buf.startswith(b"\x1b]"):
        return buf.endswith(b"\x1b\\") or buf.endswith(b"\x07")
    return False


def ask(fd: int, query: str) -> dict:
    termios.tcflush(fd, termios.TCIFLUSH)
    t0 = time.monotonic()
    os.write(fd, query.encode())
    buf = b""
    first = None
    while True:
        wait = 0.3 if buf else 0.6
        r, _, _ = select.select([fd], [], [], wait)
        if not r:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        if first is None:
            first = time.monotonic()
        buf += chunk
        if complete(buf):
            # A second answer (e.g. a terminal and a multiplexer both replying) would follow
            # at once: give it a short moment.
            r, _, _ = select.select([fd], [], [], 0.05)
            if r:
                buf += os.read(fd, 4096)
            break
    return {
        "answer": buf.decode("latin-1"),
        "ms": None if first is None else round((first - t0) * 1000, 3),
    }


def main() -> None:
    out = sys.argv[1]
    marker = sys.argv[2] if len(sys.argv) > 2 else "PROBE-DONE"
    fd = sys.stdin.fileno()
    old = termios.tcgetattr(fd)
    # IUTF8 is 0o40000 on Linux; older Pythons lack termios.IUTF8.
    iutf8 = bool(old[0] & getattr(termios, "IUTF8", 0o40000))
    results = []
    try:
        tty.setraw(fd)
        for name, q in QUERIES:
            r = ask(fd, q)
            results.append({"name": name, "query": q, **r})
    finally:
        termios.tcsetattr(fd, termios.TCSAFLUSH, old)
    doc = {
        "term": os.environ.get("TERM"),
        "iutf8": iutf8,
        "size": list(os.get_terminal_size(fd)),
        "results": results,
    }
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, out)
    # Clear what the raw-mode queries may have left, then print the marker.
    sys.stdout.write("\x1b[0m\x1b[H\x1b[2J" + marker + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
