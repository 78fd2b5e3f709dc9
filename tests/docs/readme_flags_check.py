#!/usr/bin/python3
"""The README's "Server flags" table against `banditd --helpfull`.

    readme_flags_check.py BANDITD README.md SOURCE_DIR

banditd's own flags are those `--helpfull` lists under a file of this repository ("Flags from
server/main.cc:"); Abseil's (--flagfile, --helpfull, ...) are not the README's business. Fails,
naming each difference, when a flag has no row, a row names no flag, or a row's default is not
the flag's default. Default cells: a `literal` must equal the default as --helpfull prints it;
(none) / off / on stand for "" / false / true; a cell saying how the default is computed (plain
text, or a `<placeholder>`) stands for an empty default that banditd fills in at start."""
import os
import re
import subprocess
import sys

banditd, readme, source_dir = sys.argv[1:4]

out = subprocess.run([banditd, "--helpfull"], capture_output=True, text=True, timeout=60)
text = out.stdout + out.stderr  # absl prints usage to stdout; --helpfull exits 1 on some versions
flags = {}  # name -> default as printed
current_file = None
block = None  # [name, text] of the flag being read; its description may wrap over lines


def close(block):
    if block:
        # The entry ends with "; default: VALUE;" (absl puts "default:" on a new line when long).
        d = re.search(r"(?:;|^)\s*default: (.*);\s*$", block[1])
        flags[block[0]] = d.group(1) if d else None


for line in text.splitlines():
    m = re.match(r"\s*Flags from (.+):\s*$", line)
    if m:
        close(block)
        block = None
        path = m.group(1)
        # absl prints the compile-time path: relative ("../server/main.cc", with ccache's
        # base_dir) or absolute without its leading '/' ("tmp/clone/server/main.cc").
        absolute = path if path.startswith(".") else "/" + path.lstrip("/")
        root = os.path.abspath(source_dir).rstrip("/") + "/"
        rel = absolute[len(root):] if absolute.startswith(root) else path
        while rel.startswith("../") or rel.startswith("./"):
            rel = rel[3:] if rel.startswith("../") else rel[2:]
        current_file = rel if os.path.isfile(os.path.join(source_dir, rel)) else None
        continue
    m = re.match(r"\s*--([A-Za-z0-9_]+) \(", line)
    if m:
        close(block)
        block = [m.group(1), line.strip()] if current_file else None
    elif block:
        block[1] += " " + line.strip()
close(block)
if not flags:
    sys.exit(f"no project flags found in `{banditd} --helpfull` output:\n{text[:2000]}")

rows = {}
in_section = False
with open(readme, encoding="utf-8") as f:
    for line in f:
        if line.startswith("## "):
            in_section = line.strip() == "## Server flags"
            continue
        m = re.match(r"\|\s*`--([A-Za-z0-9_]+)`\s*\|\s*([^|]*?)\s*\|", line) if in_section else None
        if m:
            if m.group(1) in rows:
                print(f"README: --{m.group(1)} has two rows")
            rows[m.group(1)] = m.group(2)
if not rows:
    sys.exit("README.md has no '## Server flags' table with `--flag` rows")


def unquote(v):
    return v[1:-1] if len(v) >= 2 and v[0] == v[-1] == '"' else v


errors = []
for name in sorted(set(flags) - set(rows)):
    errors.append(f"--{name} (default {flags[name]}) is a banditd flag without a row in the README's "
                  "'Server flags' table")
for name in sorted(set(rows) - set(flags)):
    errors.append(f"the README's 'Server flags' table has a row for --{name}, which banditd does not have")
for name in sorted(set(rows) & set(flags)):
    actual = unquote(flags[name] or "")
    cell = rows[name]
    lit = re.fullmatch(r"`([^`]*)`", cell)
    if cell == "(none)":
        ok, want = actual == "", '""'
    elif cell in ("off", "on"):
        ok, want = actual == ("true" if cell == "on" else "false"), cell
    elif lit and "<" not in lit.group(1):
        ok, want = actual == lit.group(1), lit.group(1)
    else:  # computed at start from other settings
        ok, want = actual == "", f'"" (computed: {cell})'
    if not ok:
        errors.append(f"--{name}: README default {cell!r} means {want}, banditd's default is {flags[name]}")

if errors:
    print("\n".join(errors))
    print(f"\n{len(errors)} difference(s) between README.md's flag table and `banditd --helpfull`")
    sys.exit(1)
print(f"README.md's flag table matches banditd's {len(flags)} flags (names and defaults)")
