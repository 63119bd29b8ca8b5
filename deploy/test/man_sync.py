"""man_sync.py — deploy/man/nanoserve.1 keeps up with the binary: every subcommand and
every --option that `nanoserve help` lists, every setting of `nanoserve config doc` and
every route of the README's Serving table appear in the man page; groff renders it
without warnings. A copy with one subcommand removed must fail the same check.
argv: NANOSERVE_BINARY SOURCE_DIR"""
import os
import re
import shutil
import subprocess
import sys

binary, src = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
man_path = os.path.join(src, "deploy", "man", "nanoserve.1")


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def run(*args):
    r = subprocess.run([binary] + list(args), capture_output=True, text=True)
    if r.returncode:
        fail("nanoserve %s: exit %d %s" % (" ".join(args), r.returncode, r.stderr))
    return r.stdout


def plain(roff):
    """roff source to searchable text: \\- to -, font escapes and quotes dropped."""
    t = roff.replace("\\-", "-").replace("\\e", "\\")
    t = re.sub(r"\\f[BIRP]", "", t)
    t = re.sub(r"\\\(\w\w", "", t)
    return t


help_text = run("help")
commands = []
for line in help_text.splitlines():
    m = re.match(r"^  ([a-z]+(?: (?:dump|check|doc))?)(?=\s|$)", line)
    if m:
        commands.append(m.group(1))
options = sorted(set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", help_text)))
settings = re.findall(r"^\| `([a-z_]+\.[a-z_]+)` \|", run("config", "doc"), re.M)
readme = open(os.path.join(src, "README.md")).read()
routes = re.findall(r"^\| `((?:GET|POST) /[\w/]+)`", readme, re.M)
routes += re.findall(r"`((?:GET|POST) /\w+)`", "".join(
    l for l in readme.splitlines(True) if l.startswith("| `POST /tokenize`")))
routes = sorted(set(routes))
if len(commands) < 9 or len(options) < 10 or len(settings) < 30 or len(routes) < 8:
    fail("could not read the lists: %d commands, %d options, %d settings, %d routes" %
         (len(commands), len(options), len(settings), len(routes)))


def missing(roff):
    text = plain(roff)
    out = []
    for c in commands:  # a command is documented by a .B/.TP heading that starts with it
        if not re.search(r"(?m)^\.B %s(\s|$)" % re.escape(c), text):
            out.append("subcommand '%s'" % c)
    for o in options:
        if not re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(o), text):
            out.append("option %s" % o)
    for s in settings:
        if not re.search(r"(?m)^\.B %s$" % re.escape(s), text):
            out.append("setting %s" % s)
    for r in routes:
        if r not in text:
            out.append("route '%s'" % r)
    return out


roff = open(man_path).read()
gaps = missing(roff)
if gaps:
    fail("deploy/man/nanoserve.1 lacks: " + ", ".join(gaps))
print("man page lists %d subcommands, %d options, %d settings, %d routes" %
      (len(commands), len(options), len(settings), len(routes)))

# negative check: drop the mkmodel entry (and its synopsis line)
cut = re.sub(r"(?m)^\.B (nanoserve )?mkmodel.*\n", "", roff)
if not any("mkmodel" in g for g in missing(cut)):
    fail("a man page without mkmodel passed the check")

groff = shutil.which("groff")
if not groff:
    fail("groff missing (scripts/setup installs groff-base)")
r = subprocess.run([groff, "-man", "-ww", "-z", man_path], capture_output=True, text=True)
if r.returncode or r.stderr.strip():
    fail("groff warnings:\n" + r.stderr)
print("man_sync: ok")
