#!/usr/bin/env python3
"""The man pages (man/): each renders without a warning, and they stay in step
with what they document.

  install_man.py SOURCE_DIR BUILD_DIR TRAPKIT TKSIM

- groff -man -ww and man -l --warnings render every page with nothing on
  stderr; lexgrog (whatis, man -k) parses its NAME line; .TH names the file.
- Every function the public headers declare (gcc -aux-info, inline ones too)
  is in a page's SYNOPSIS, and every symbol libtrapkit.so and
  libtrapkit_eh.so export (nm -D) is a name of a page's NAME line, so that
  `man tk_x` finds it; no name is on two pages.
- The SYNOPSIS prototypes compile against the headers: a parameter or result
  type that differs is a conflicting declaration.  A name a page documents
  is a function, macro or class of the headers.
- Every reference to a page of trapkit's, such as tk_unprot(3), leads to one.
- trapkit(1) and tksim(1) have every command and option of `--help`; trapkit(7)
  every TRAPKIT_* variable the sources read and every section-3 page.
- The pages as the build installs them (BUILD_DIR/man, and gzipped for the
  Debian package in BUILD_DIR/deb/man): all there, every link to a page.
"""
import gzip
import os
import re
import subprocess
import sys
import tempfile

src, build, trapkit, tksim = sys.argv[1:5]
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


mandir = os.path.join(src, "man")
pages = sorted(os.path.join(d, f) for d, _, fs in os.walk(mandir) for f in fs
               if re.search(r"\.[1-8]$", f))
if len(pages) < 20:
    fail(f"only {len(pages)} pages in man/")

env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8", MAN_KEEP_FORMATTING="0")


def render(page):
    """The page as plain text (man -l, no formatting)."""
    r = run(["man", "--warnings=w", "-l", page], env=env)
    text = r.stdout
    if r.returncode or r.stderr.strip():
        fail(f"{rel(page)}: man -l: rc {r.returncode}: {r.stderr.strip()}")
    return re.sub(r".\x08", "", text)


def rel(page):
    return os.path.relpath(page, src)


def section(text, name):
    """The lines of a rendered section (without its heading)."""
    m = re.search(rf"^{name}\n(.*?)(?=^[A-Z][A-Z ]+\n|\Z)", text, re.M | re.S)
    return m.group(1) if m else ""


names = {}  # name on a NAME line -> page
synopsis = {}  # page -> SYNOPSIS text
rendered = {}
for page in pages:
    base = os.path.basename(page)
    r = run(["groff", "-man", "-Tutf8", "-ww", "-z", page])
    if r.returncode or r.stderr.strip():
        fail(f"{rel(page)}: groff -ww: {r.stderr.strip()}")
    text = render(page)
    rendered[page] = text
    for sec in ("NAME", "DESCRIPTION"):
        if not section(text, sec).strip():
            fail(f"{rel(page)}: no {sec} section")
    r = run(["lexgrog", page])
    if r.returncode:
        fail(f"{rel(page)}: lexgrog cannot parse its NAME line: {r.stdout}{r.stderr}")
    with open(page, encoding="utf-8") as f:
        roff = f.read()
    th = re.match(r"\.TH (\S+) (\d)", roff)
    if not th or f"{th.group(1)}.{th.group(2)}" != base:
        fail(f"{rel(page)}: .TH does not name {base}")
    m = re.search(r"^\.SH NAME\n(.*?) \\-", roff, re.M)
    if not m:
        fail(f"{rel(page)}: no 'name \\- description' line after .SH NAME")
        continue
    for name in (n.strip() for n in m.group(1).split(",")):
        key = (name, base.rsplit(".", 1)[1])
        if key in names:
            fail(f"{name} is on the NAME lines of {names[key]} and {base}")
        names[key] = base
    synopsis[page] = section(text, "SYNOPSIS")

names_sec3 = {n for (n, s) in names if s == "3"}

# every reference to a page of trapkit's (tk_x(3), trapkit(1) ...) leads to one
for page, text in rendered.items():
    for name, sect in set(re.findall(r"\b(tk_\w+|trapkit|tksim)\((\d)\)", text)):
        if (name, sect) not in names:
            fail(f"{rel(page)} refers to {name}({sect}), which no page documents")

# ---- the headers' functions and the libraries' symbols -------------------------
inc = os.path.join(src, "include")
c_headers = ["trapkit.h", "checkpoint.h", "aseq.h", "eh.h", "gc.h", "pheap.h", "dsm.h", "zpage.h",
             "guard.h", "lazy.h"]
# (dsm.h includes MPI's header)
mpi_flags = run(["mpicc", "--showme:compile"]).stdout.split()
with tempfile.TemporaryDirectory() as tmp:
    tu = os.path.join(tmp, "all.c")
    with open(tu, "w") as f:
        f.writelines(f"#include <trapkit/{h}>\n" for h in c_headers)
    aux = os.path.join(tmp, "all.aux")
    r = run(["cc", "-std=gnu11", "-fsyntax-only", "-I", inc] + mpi_flags + ["-aux-info", aux, tu])
    if r.returncode:
        fail("the headers do not compile: " + r.stderr)
        aux_text = ""
    else:
        with open(aux) as f:
            aux_text = f.read()
header_funcs = set()
for line in aux_text.splitlines():
    m = re.match(r"/\* (\S+):\d+:\w+ \*/ .*?\b(tk_[a-z]\w*) \(", line)
    if m and "/trapkit/" in m.group(1):
        header_funcs.add(m.group(2))
if len(header_funcs) < 60:
    fail(f"gcc -aux-info found only {len(header_funcs)} functions in the headers")
header_text = ""
for h in os.listdir(os.path.join(inc, "trapkit")):
    with open(os.path.join(inc, "trapkit", h)) as f:
        header_text += f.read()
header_macros = set(re.findall(r"^#define (\w+)", header_text, re.M))


def exported(lib):
    r = run(["nm", "-D", "--defined-only", lib])
    if r.returncode:
        fail(f"nm -D {lib}: {r.stderr}")
    return {re.sub(r"@.*", "", l.split()[-1]) for l in r.stdout.splitlines()
            if re.search(r" tk_[a-z]\w*(@|$)", l)}


symbols = exported(os.path.join(build, "libtrapkit.so")) | exported(
    os.path.join(build, "cxx", "libtrapkit_eh.so"))
if len(symbols) < 45:
    fail(f"only {len(symbols)} tk_ symbols exported")
for s in sorted(symbols - names_sec3):
    fail(f"exported {s} is on no page's NAME line (man {s} would find nothing)")
all_synopses = "\n".join(synopsis.values())
for fn in sorted(header_funcs):
    if not re.search(rf"\b{fn}\(", all_synopses):
        fail(f"{fn} (declared in include/trapkit) is in no page's SYNOPSIS")
for (name, sect), page in sorted(names.items()):
    if sect != "3" or name.startswith("tk::") or name == page.rsplit(".", 1)[0]:
        continue
    if name not in header_funcs and name not in header_macros:
        fail(f"{page} names {name}, which the headers do not declare")
for name in (n for (n, s) in names if n.startswith("tk::")):
    cls = name[4:]
    if not re.search(rf"\b(class {cls}\b|auto {cls}\()", header_text):
        fail(f"tk_fault_scope.3 names {name}, which exception.hpp does not define")

# ---- the SYNOPSIS prototypes compile against the headers ----------------------
decl_re = re.compile(r"^(typedef .*|[A-Za-z_][\w \*]*?\b(tk_\w+)\(.*\));$")
for page, syn in synopsis.items():
    if not page.endswith(".3") or "exception.hpp" in syn:
        continue
    includes = re.findall(r"^\s*(#include <trapkit/[\w.]+>)", syn, re.M)
    decls = []
    for line in syn.splitlines():  # .nf: one prototype a line
        line = line.strip()
        m = decl_re.match(line)
        if m:
            decls.append(line)
            if m.group(2) and m.group(2) not in header_funcs:
                fail(f"{rel(page)}: SYNOPSIS declares {m.group(2)}, which the headers do not")
    if not includes or not decls:
        fail(f"{rel(page)}: no #include or no prototype in the SYNOPSIS")
        continue
    with tempfile.NamedTemporaryFile("w", suffix=".c") as f:
        f.write("\n".join(includes + decls) + "\n")
        f.flush()
        r = run(["cc", "-std=gnu11", "-fsyntax-only", "-Werror", "-I", inc] + mpi_flags + [f.name])
        if r.returncode:
            fail(f"{rel(page)}: its SYNOPSIS does not match the headers:\n{r.stderr}")

# ---- the programs' pages --------------------------------------------------------
def check_options(prog, page, extra_words):
    r = run([prog, "--help"])
    text = rendered.get(os.path.join(mandir, "man1", page), "")
    words = set(re.findall(r"(?<![\w-])--[a-z][\w-]*", r.stdout)) | set(extra_words(r.stdout))
    if len(words) < 5:
        fail(f"{prog} --help: too little found: {sorted(words)}")
    for w in sorted(words):
        if not re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", text):
            fail(f"{page} lacks {w} (in {os.path.basename(prog)} --help)")


check_options(trapkit, "trapkit.1", lambda h: re.findall(r"^  ([a-z]+)\s", h, re.M) +
              re.findall(r"TRAPKIT_\w+", h))
check_options(tksim, "tksim.1", lambda h: re.findall(r"\b(10[0-9]) ", h))

overview = rendered.get(os.path.join(mandir, "man7", "trapkit.7"), "")
env_read = set()
for d in ("src", "cxx"):
    for root, _, fs in os.walk(os.path.join(src, d)):
        for fn in fs:
            if fn.endswith((".c", ".cpp", ".h")):
                with open(os.path.join(root, fn), errors="replace") as f:
                    env_read |= set(re.findall(r'getenv\("(TRAPKIT_\w+)"\)', f.read()))
if not env_read:
    fail("no getenv(\"TRAPKIT_...\") found in src/ and cxx/")
for v in sorted(env_read):
    if not re.search(rf"\b{v}\b", section(overview, "ENVIRONMENT")):
        fail(f"trapkit.7's ENVIRONMENT lacks {v}, which the library reads")
see_also = section(overview, "SEE ALSO")
for page in pages:
    name, sect = os.path.basename(page).rsplit(".", 1)
    if page.endswith("trapkit.7"):
        continue
    if f"{name}({sect})" not in see_also.replace("\n", " ").replace(" ", ""):
        fail(f"trapkit.7's SEE ALSO lacks {name}({sect})")

# ---- the pages as the build installs them ---------------------------------------
for tree, suffix in ((os.path.join(build, "man"), ""), (os.path.join(build, "deb", "man"), ".gz")):
    for page in pages:
        built = os.path.join(tree, os.path.relpath(page, mandir)) + suffix
        if not os.path.isfile(built):
            fail(f"{built} missing")
            continue
        if suffix:
            with gzip.open(built, "rt") as f, open(page) as g:
                if f.read() != g.read():
                    fail(f"{built} differs from {rel(page)}")
    links = 0
    for (name, sect), base in names.items():
        if not re.fullmatch(r"[A-Za-z_]\w*", name) or f"{name}.{sect}" == base:
            continue
        link = os.path.join(tree, f"man{sect}", f"{name}.{sect}{suffix}")
        if not os.path.islink(link) or os.readlink(link) != base + suffix:
            fail(f"{link}: not a link to {base}{suffix}")
        links += 1
    if links < 40:
        fail(f"{tree}: only {links} links")

n = len(pages)
if failures:
    print(f"install_man: {len(failures)} failures")
    sys.exit(1)
print(f"install_man: {n} pages, {len(names)} names, {len(header_funcs)} header functions, "
      f"{len(symbols)} exported symbols: ok")
