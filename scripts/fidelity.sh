#!/usr/bin/env bash
# Fidelity check: run the same scenarios in tmux (the reference) and in maxx at the same size,
# and diff the screens. One line per scenario, PASS or DIFF (with a unified diff); exit 1 if
# any scenario differs or could not run. See docs/terminal.md, "Fidelity".
#
#   scripts/fidelity.sh [--bin PATH] [--only a,b] [--keep]
#
# --bin   the maxx binary (default target/release/maxx, else target/debug/maxx)
# --only  a comma-separated subset of the scenarios (names below, `--list` prints them)
# --keep  keep the temp dir (captures, daemon log) and print its path
#
# Compared per check: size, cursor position and visibility, whether the alternate screen is
# on, every viewport row (trailing blanks trimmed), and the style runs of the cells that have
# a non-default style (tmux `capture-pane -p -e` vs maxx `sessions snapshot --cells`).
# Everything runs on private ground: a temp control dir (MAXX_CONTROL_DIR), a policy file
# granting `output:read` to a source `fidelity`, a private tmux server (`-L`, its own config),
# a temp HOME. Both sides run `/bin/sh -c CMD` with TERM=xterm-256color and LANG=C.UTF-8, so
# the programs write the same bytes to both. Every wait is a condition with a deadline (text
# on the screen, or a marker file the program creates when the screen must not be read yet).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=""
only=""
keep=0
list=0
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --list) list=1; shift ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fidelity.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

SCENARIOS="plain sgr tabs wide scroll_region resize_scroll_region alt_screen_flood alt_screen_47 wrap_resize_narrower vim vim_resize_unread less cursor_save_restore insert_delete"
if [ "$list" = 1 ]; then echo "$SCENARIOS" | tr ' ' '\n'; exit 0; fi
for o in ${only//,/ }; do
  case " $SCENARIOS " in *" $o "*) ;; *) echo "fidelity.sh: unknown scenario $o (see --list)" >&2; exit 2 ;; esac
done
if [ -z "$bin" ]; then
  if [ -x "$root/target/release/maxx" ]; then bin=$root/target/release/maxx; else bin=$root/target/debug/maxx; fi
fi
[ -x "$bin" ] || { echo "fidelity.sh: no maxx binary at $bin (build it or pass --bin)" >&2; exit 2; }
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
for tool in tmux python3 jq vim less; do
  command -v "$tool" >/dev/null 2>&1 || { echo "fidelity.sh: $tool is not installed" >&2; exit 2; }
done

tmp=$(mktemp -d /tmp/maxx-fidelity.XXXXXX)
chmod 700 "$tmp"
mkdir -p "$tmp/home" "$tmp/config" "$tmp/out" "$tmp/mark"
export HOME=$tmp/home XDG_CONFIG_HOME=$tmp/config
export MAXX_CONTROL_DIR=$tmp/ctl MAXX_CONTROL_POLICY_FILE=$tmp/policy.json
export LANG=C.UTF-8 LC_ALL=C.UTF-8 SHELL=/bin/sh LESSHISTFILE=-
unset TMUX MAXX_SESSION_ID MAXX_SURFACE_ID MAXX_REGISTRATION_TOKEN
printf '%s\n' '{"version":1,"sources":[{"id":"fidelity","kind":"local","allow":["output:read","tabs:list"]}]}' >"$MAXX_CONTROL_POLICY_FILE"
chmod 600 "$MAXX_CONTROL_POLICY_FILE"
tsock=maxx-fidelity-$$
cat >"$tmp/tmux.conf" <<'EOF'
set -g status off
set -g default-terminal xterm-256color
set -g history-limit 10000
set -g remain-on-exit on
set -g escape-time 0
EOF

daemon_pid=""
cleanup() {
  set +e
  T kill-server >/dev/null 2>&1
  if [ -n "$daemon_pid" ]; then
    kill -TERM "$daemon_pid" 2>/dev/null
    for _ in $(seq 1 200); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.05; done
    kill -KILL "$daemon_pid" 2>/dev/null
    wait "$daemon_pid" 2>/dev/null
  fi
  if [ "$keep" = 1 ]; then echo "kept $tmp" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

T() { tmux -L "$tsock" -f "$tmp/tmux.conf" "$@"; }
M() { "$bin" "$@"; }
R() { "$bin" --as fidelity "$@"; }

# Poll a condition every 20 ms until it holds or DEADLINE seconds pass.
poll() {
  local deadline=$1; shift
  local end=$((SECONDS + deadline))
  until "$@"; do
    [ "$SECONDS" -lt "$end" ] || return 1
    sleep 0.02
  done
}

"$bin" daemon --log-level warn >"$tmp/daemon.log" 2>&1 &
daemon_pid=$!
poll 15 test -S "$MAXX_CONTROL_DIR/control.sock" || { echo "fidelity.sh: the daemon did not start:" >&2; cat "$tmp/daemon.log" >&2; exit 3; }
poll 15 test -s "$MAXX_CONTROL_DIR/token" || exit 3
T new-session -d -s keep -x 80 -y 24 'exec sleep 1000000'

# Test files for vim and less.
for i in $(seq 1 200); do
  if [ "$i" = 5 ] || [ "$i" = 12 ]; then
    printf 'line %03d %s\n' "$i" "$(printf 'long-%02d ' $(seq 1 20))"
  else
    printf 'line %03d lorem ipsum dolor sit amet\n' "$i"
  fi
done >"$tmp/file.txt"
seq -f 'line %03g' 1 100 >"$tmp/plain.txt"

# ---- steps: each scenario calls these; $side (tmux|maxx) says which terminal they drive ----

side=""; name=""; sid=""; checks=0

# start COLS ROWS CMD: the scenario's program (`/bin/sh -c`), kept alive after it finishes.
start() {
  local cmd="export TERM=xterm-256color LANG=C.UTF-8 LC_ALL=C.UTF-8; cd '$tmp'; $3"
  if [ "$side" = tmux ]; then
    T new-session -d -s "$name" -x "$1" -y "$2" "$cmd"
  else
    sid=$(M sessions create --no-focus --cols "$1" --rows "$2" --command "$cmd" | jq -r '.result.session.session_id')
    [ -n "$sid" ] && [ "$sid" != null ] || { echo "create failed" >&2; return 1; }
  fi
}

# screen TEXT: wait until TEXT is on the screen (this reads the screen).
screen() {
  if [ "$side" = tmux ]; then
    poll 30 sh -c 'tmux -L "$1" capture-pane -p -t "$2" | grep -qF -- "$3"' _ "$tsock" "$name" "$1" \
      || { echo "tmux: \"$1\" never appeared" >&2; check "FAILED waiting for \"$1\""; return 1; }
  else
    R sessions wait "$sid" --until "$1" --timeout 30s >/dev/null \
      || { echo "maxx: \"$1\" never appeared" >&2; check "FAILED waiting for \"$1\""; return 1; }
  fi
}

# mark NAME: the shell snippet a program runs to say "drawn" without anyone reading the screen.
mark() { printf ": > '%s/mark/%s.%s'" "$tmp" "$name" "$1"; }
# drawn NAME: wait for that marker file (no screen read: maxx's grid stays lazy).
drawn() {
  # shellcheck disable=SC2016
  poll 30 test -e "$tmp/mark/$name.$1" || { echo "$side: marker $1 never appeared" >&2; return 1; }
  rm -f "$tmp/mark/$name.$1"
}

resize() {
  if [ "$side" = tmux ]; then T resize-window -t "$name" -x "$1" -y "$2"
  else M sessions resize "$sid" --cols "$1" --rows "$2" >/dev/null; fi
}

keys() {
  if [ "$side" = tmux ]; then T send-keys -t "$name" "$@"
  else M sessions send-keys "$sid" "$@" >/dev/null; fi
}

# check LABEL: capture the screen, normalised, into the side's capture file.
check() {
  local out=$tmp/out/$name.$side raw=$tmp/out/raw.$side
  checks=$((checks + 1))
  if [ "$side" = tmux ]; then
    T display-message -p -t "$name" '#{pane_width} #{pane_height} #{cursor_x} #{cursor_y} #{cursor_flag} #{alternate_on}' >"$raw.meta"
    # -N: styled trailing spaces too (rstripped below, but their style is compared).
    T capture-pane -p -e -N -t "$name" >"$raw.screen"
  else
    R sessions snapshot "$sid" --cells >"$raw.screen"
    R sessions inspect "$sid" >"$raw.meta"
  fi
  printf '## %s\n' "$1" >>"$out"
  python3 - "$side" "$raw.meta" "$raw.screen" >>"$out" <<'PY'
import json, sys, unicodedata

side, meta_path, screen_path = sys.argv[1:4]

def width(ch):
    if unicodedata.combining(ch) or ch in "\u200d\ufe0f":
        return 0
    return 2 if unicodedata.east_asian_width(ch) in "WF" else 1

def sgr(params, st):
    """Apply one SGR parameter list to the style dict st (tmux `-e` output)."""
    ps = [p for p in params.replace(":", ";").split(";")] or ["0"]
    i = 0
    while i < len(ps):
        p = int(ps[i] or 0)
        if p == 0:
            st.clear()
        elif p in (1, 2, 3, 4, 7, 8, 9):
            st[{1: "bold", 2: "dim", 3: "italic", 4: "underline", 7: "inverse", 8: "hidden", 9: "strikethrough"}[p]] = True
        elif p == 22:
            st.pop("bold", None); st.pop("dim", None)
        elif p in (23, 24, 27, 28, 29):
            st.pop({23: "italic", 24: "underline", 27: "inverse", 28: "hidden", 29: "strikethrough"}[p], None)
        elif 30 <= p <= 37 or 90 <= p <= 97:
            st["fg"] = "p%d" % (p - 30 if p < 90 else p - 82)
        elif 40 <= p <= 47 or 100 <= p <= 107:
            st["bg"] = "p%d" % (p - 40 if p < 100 else p - 92)
        elif p in (39, 49):
            st.pop("fg" if p == 39 else "bg", None)
        elif p in (38, 48, 58):
            key = {38: "fg", 48: "bg", 58: "ul"}[p]
            if i + 1 < len(ps) and ps[i + 1] == "5":
                st[key] = "p%d" % int(ps[i + 2]); i += 2
            elif i + 1 < len(ps) and ps[i + 1] == "2":
                rgb = [int(x or 0) for x in ps[i + 2:i + 5]]
                if len(ps) > i + 5 and len(ps[i + 2:]) >= 4 and ps[i + 2] == "":
                    rgb = [int(x or 0) for x in ps[i + 3:i + 6]]; i += 1
                st[key] = "#%02x%02x%02x" % tuple(rgb); i += 4
            if key == "ul":
                st.pop("ul", None)
        i += 1

def maxx_style(s):
    out = {k: True for k in ("bold", "dim", "italic", "underline", "inverse", "hidden", "strikethrough") if s.get(k)}
    for key in ("fg", "bg"):
        c = s.get(key, "default")
        if isinstance(c, dict) and "palette" in c:
            out[key] = "p%d" % c["palette"]["index"]
        elif isinstance(c, dict) and "rgb" in c:
            out[key] = "#%02x%02x%02x" % (c["rgb"]["r"], c["rgb"]["g"], c["rgb"]["b"])
    return out

styled = {}  # (row, col) -> (char, style)
if side == "tmux":
    w, h, cx, cy, vis, alt = open(meta_path).read().split()
    rows = []
    for r, line in enumerate(open(screen_path, encoding="utf-8", errors="replace").read().split("\n")[: int(h)]):
        st, text, col, i = {}, "", 0, 0
        while i < len(line):
            if line[i] == "\x1b":
                j = i + 1
                if j < len(line) and line[j] == "[":
                    k = j + 1
                    while k < len(line) and not ("\x40" <= line[k] <= "\x7e"):
                        k += 1
                    if k < len(line) and line[k] == "m":
                        sgr(line[j + 1:k], st)
                    i = k + 1
                elif j < len(line) and line[j] == "]":
                    k = line.find("\x1b\\", j)
                    i = len(line) if k < 0 else k + 2
                else:
                    i = j + 1
                continue
            ch = line[i]
            if st and width(ch) > 0:
                styled[(r, col)] = (ch, dict(st))
            elif st and styled.get((r, col - 1)) and width(ch) == 0:
                c0, s0 = styled[(r, col - 1)]
                styled[(r, col - 1)] = (c0 + ch, s0)
            text += ch
            col += width(ch)
            i += 1
        rows.append(text)
    rows += [""] * (int(h) - len(rows))
    head = (int(w), int(h), int(cx), int(cy), vis == "1", alt == "1")
else:
    snap = json.load(open(screen_path))
    meta = json.load(open(meta_path))
    if not snap.get("ok") or not meta.get("ok"):
        print("READ FAILED: %s %s" % (snap.get("error"), meta.get("error")))
        sys.exit(0)
    s, m = snap["result"], meta["result"]
    rows = list(s["lines"]) + [""] * (s["rows"] - len(s["lines"]))
    for c in s.get("cells") or []:
        st = maxx_style(c["style"])
        if st:
            styled[(c["row"], c["col"])] = (c["text"], st)
    head = (s["cols"], s["rows"], s["cursor"]["x"], s["cursor"]["y"], s["cursor"]["visible"], m["alt_screen"])

print("size %dx%d cursor %d,%d visible %s alt_screen %s" % (head[0], head[1], head[2], head[3], str(head[4]).lower(), str(head[5]).lower()))
for r in rows:
    print("|" + r.rstrip(" "))
runs = []
for (r, c) in sorted(styled):
    ch, st = styled[(r, c)]
    key = " ".join(k if v is True else "%s=%s" % (k, v) for k, v in sorted(st.items()))
    last = runs[-1] if runs else None
    if last and last[0] == r and last[2] == c and last[3] == key:
        last[2] = c + max(width(ch[0]), 1); last[4] += ch
    else:
        runs.append([r, c, c + max(width(ch[0]), 1), key, ch])
for r, c0, c1, key, text in runs:
    print("style row %d col %d-%d [%s] %r" % (r, c0, c1 - 1, key, text))
PY
}

stop_session() {
  if [ "$side" = tmux ]; then T kill-session -t "$name" 2>/dev/null || true
  elif [ -n "$sid" ]; then M sessions action "$sid" --action close >/dev/null 2>&1 || true; fi
  sid=""
}

# ---- scenarios ----

END="printf 'FID-%s' END"
KEEP="exec sleep 1000000"

sc_plain() {
  start 80 24 "for i in \$(seq 1 40); do echo \"plain line \$i of forty\"; done; $END; $KEEP"
  screen FID-END; check "after 40 lines"
}

sc_sgr() {
  start 80 24 "printf '\\033[1mbold\\033[22m \\033[2mdim\\033[22m \\033[3mitalic\\033[23m \\033[4munder\\033[24m \\033[7mrev\\033[27m \\033[9mstrike\\033[29m \\033[8mhidden\\033[28m\\n';
    for c in 30 31 32 33 34 35 36 37 90 91 92 93 94 95 96 97; do printf '\\033[%sm%s\\033[39m ' \$c \$c; done; echo;
    for c in 40 41 42 43 44 45 46 47 100 101 102 103 104 105 106 107; do printf '\\033[%sm%s\\033[49m ' \$c \$c; done; echo;
    printf '\\033[38;5;208m208\\033[0m \\033[48;5;27m27bg\\033[0m \\033[38;2;255;128;0mrgb\\033[0m \\033[48;2;1;2;3mrgbbg\\033[0m \\033[1;4;31;42mall\\033[0m\\n';
    printf '\\033[41m   \\033[0m spaces with a background\\n';
    $END; $KEEP"
  screen FID-END; check "SGR"
}

sc_tabs() {
  start 80 24 "printf 'a\\tb\\tc\\n'; printf '1234567\\t|8\\n'; printf 'x\\t\\ty\\n'; printf '\\033[3g\\033[10G\\033H\\r\\tcustom stop at 10\\n'; $END; $KEEP"
  screen FID-END; check "tabs"
}

sc_wide() {
  start 80 24 "printf '日本語のテキスト|\\n'; printf '한국어 中文 ｆｕｌｌ|\\n'; printf 'emoji 😀👍 ok|\\n'; printf 'skin 👍🏽 zwj 👨‍👩‍👧 flag 🇫🇷 vs16 ☺️|\\n'; printf 'e\\314\\201 combining|\\n'; printf '%78s日本|\\n' ''; $END; $KEEP"
  screen FID-END; check "wide"
}

sc_scroll_region() {
  start 80 24 "printf '\\033[2J\\033[Htop 1\\ntop 2\\ntop 3\\ntop 4'; printf '\\033[20;1Hbottom 20\\033[24;1Hbottom 24';
    printf '\\033[5;15r\\033[15;1H'; for i in \$(seq 1 40); do printf '\\nregion %d' \$i; done;
    printf '\\033[5;1H\\033[3Mdeleted 3\\033[r\\033[17;1H'; $END; $KEEP"
  screen FID-END; check "scroll region"
}

# A vim-like program: a scroll region that stays set, scrolled inside; resized 80x24 -> 120x40
# before anything read the screen; then more output after the resize.
sc_resize_scroll_region() {
  start 80 24 "printf '\\033[2J\\033[1;1Htop bar\\033[24;1Hbottom bar\\033[2;23r\\033[2;1H';
    for i in \$(seq 1 40); do printf 'scroll %d\\n' \$i; done; $(mark drawn); read x;
    for i in \$(seq 41 70); do printf 'scroll %d\\n' \$i; done; $END; $KEEP"
  drawn drawn; resize 120 40; check "after resize to 120x40 (nothing read before)"
  keys Enter; screen FID-END; check "after 30 more lines"
}

sc_alt_screen_flood() {
  start 80 24 "for i in \$(seq 1 5); do echo \"main screen line \$i\"; done; printf '\\033[?1049h\\033[H\\033[2J';
    yes 'alternate screen filler line 0123456789abcdefghijklmnopqrstuvwxyz' | head -n 40000; echo ALT-END; read x;
    printf '\\033[?1049l'; $END; $KEEP"
  screen ALT-END; check "in the alternate screen after 2.6 MB"
  keys Enter; screen FID-END; check "after leaving the alternate screen"
}

# DEC 47 and 1047: the alternate screen without 1049's cursor save (one cursor for both
# screens, DECSC untouched).
sc_alt_screen_47() {
  start 80 24 "printf 'main 1\\nmain 2\\nmain 3\\n\\033[5;7H\\0337\\033[1;1H\\033[?47hA47\\n\\033[10;20HALT-47';
    read x; printf '\\033[?47lafter47\\033[?1047hB1047\\033[12;3HALT-1047'; read x;
    printf '\\033[?1047lafter1047\\0338R\\033[20;1H'; $END; $KEEP"
  screen ALT-47; check "on the alternate screen (47)"
  keys Enter; screen ALT-1047; check "on the alternate screen (1047)"
  keys Enter; screen FID-END; check "back on the primary screen"
}

sc_wrap_resize_narrower() {
  start 80 24 "echo short one; printf 'W%.0s' \$(seq 1 200); echo; echo short two; printf '%s' 'a line of exactly eighty characters .............................................'; echo; echo last; $(mark drawn); $KEEP"
  drawn drawn; check "80x24"
  resize 50 24; check "after resize to 50x24"
}

sc_vim() {
  start 80 24 "exec vim -u NONE -i NONE -n file.txt"
  screen '"file.txt" 200'; check "vim opened"
  keys ':$' Enter; screen "line 200"; check "vim at the last line"
  # vim redraws on SIGWINCH: at 40 rows the last line's screen starts at line 162.
  resize 120 40; screen "line 162"; keys ':echo "RESI" . "ZED"' Enter; screen RESIZED; check "vim after resize to 120x40"
  keys ':1' Enter; screen "line 001"; check "vim back at line 1"
}

# The issue's case: vim resized 80x24 -> 120x40 before anything read the screen (vim draws,
# then writes a marker file itself; no screen read before the resize).
sc_vim_resize_unread() {
  start 80 24 "exec vim -u NONE -i NONE -n -c redraw -c 'call writefile([], \"$tmp/mark/$name.drawn\")' file.txt"
  drawn drawn; resize 120 40
  keys ':echo "RESI" . "ZED"' Enter; screen RESIZED; check "vim after resize to 120x40 (nothing read before)"
}

sc_less() {
  start 80 24 "exec less plain.txt"
  screen "plain.txt"; check "less opened"
  keys Space; screen "line 046"; check "less page 2"
}

sc_cursor_save_restore() {
  start 80 24 "printf 'start\\0337\\033[10;20Hmiddle\\0338|restored\\n'; printf '\\033[s\\033[15;5Hcsi-save\\033[u|csi-restored\\n';
    printf '\\033[1;33m\\0337\\033[0m\\033[12;1Hplain\\0338styled\\033[0m\\n'; printf '\\033[20;1H'; $END; $KEEP"
  screen FID-END; check "save/restore"
}

sc_insert_delete() {
  start 80 24 "for i in \$(seq 1 15); do echo \"row \$i\"; done; printf '\\033[3;1H\\033[2L'; printf '\\033[8;1H\\033[3M';
    printf '\\033[1;3H\\033[4@'; printf '\\033[2;2H\\033[2P'; printf '\\033[16;10r\\033[12;1H\\033[2L\\033[r';
    printf '\\033[5;1HXXXX\\033[5;2H\\033[2X'; printf '\\033[22;1H'; $END; $KEEP"
  screen FID-END; check "IL/DL/ICH/DCH/ECH"
}

# ---- run ----

failed=0
results=()
for name in $SCENARIOS; do
  if [ -n "$only" ] && ! printf ',%s,' "$only" | grep -q ",$name,"; then continue; fi
  status=PASS
  note=""
  for side in tmux maxx; do
    : >"$tmp/out/$name.$side"
    # A subshell with -e in force (an `if` would switch it off): the first failed step ends it.
    set +e
    ( set -e; "sc_$name" ) 2>"$tmp/out/$name.$side.err"
    rc=$?
    set -e
    if [ "$rc" != 0 ]; then
      status=ERROR
      note="${note:+$note; }$(tr '\n' ' ' <"$tmp/out/$name.$side.err")"
    fi
    # The subshell kept sid to itself: close what it created (tmux by name, maxx by listing).
    if [ "$side" = tmux ]; then T kill-session -t "$name" 2>/dev/null || true; fi
  done
  for id in $(M sessions list 2>/dev/null | jq -r '.result.sessions[]? | select(.lifecycle != "closed" and .lifecycle != "archived") | .session_id'); do
    M sessions action "$id" --action close >/dev/null 2>&1 || true
  done
  if [ "$status" = PASS ] && ! diff -q "$tmp/out/$name.tmux" "$tmp/out/$name.maxx" >/dev/null; then
    status=DIFF
  fi
  printf '%-5s %s%s\n' "$status" "$name" "${note:+  ($note)}"
  if [ "$status" != PASS ]; then
    failed=1
    diff -u --label "tmux $name" --label "maxx $name" "$tmp/out/$name.tmux" "$tmp/out/$name.maxx" | sed 's/^/    /' || true
  fi
  results+=("$status $name")
done

echo
echo "maxx $("$bin" --version | awk '{print $2}') ($bin), $(tmux -V); $(printf '%s\n' "${results[@]}" | grep -c '^PASS') of ${#results[@]} scenarios match"
exit "$failed"
