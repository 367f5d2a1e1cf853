#!/usr/bin/env python3
"""libtrapkit.so exports exactly the symbols src/trapkit.map names, each at the
version node that names it, and every function the public headers declare.

  install_symbols.py SOURCE_DIR LIBTRAPKIT_SO LIBTRAPKIT_EH_SO

- The map names every symbol (no wildcard in a global list) and ends each
  node's globals with `local: *`;
- nm -D --defined-only of the library: each exported symbol is in the map,
  at its node (name@@NODE), and each name of the map is exported; a name in
  several nodes (a function whose behaviour changed, kept for the programs
  bound to the old node) is exported at the newest as the default
  (name@@NEW) and at each older one as name@OLD, nothing else;
- every non-inline function of trapkit/*.h but eh.h (gcc -aux-info) is
  exported by libtrapkit.so; those of eh.h by libtrapkit_eh.so;
- a program linked against the library binds its symbols at a version
  (objdump -T shows TRAPKIT_0 for them), so a later library that keeps the
  node keeps it working.
"""
import os
import re
import subprocess
import sys
import tempfile

src, lib, eh_lib = sys.argv[1:4]
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        fail(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return r.stdout


# ---- the map --------------------------------------------------------------
with open(os.path.join(src, "src", "trapkit.map")) as f:
    text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
node_of = {}  # name -> the newest node naming it (its default version)
nodes_of = {}  # name -> every node naming it, in the map's order
nodes = re.findall(r"([\w.]+)\s*\{(.*?)\}\s*([\w.]*)\s*;", text, re.S)
if not nodes:
    fail("no version node in src/trapkit.map")
for node, body, parent in nodes:
    m = re.match(r"\s*global:(.*?)(?:local:(.*))?$", body, re.S)
    if not m:
        fail(f"{node}: no global: list")
        continue
    for name in (n.strip() for n in m.group(1).split(";")):
        if not name:
            continue
        if re.search(r"[*?\[]", name):
            fail(f"{node}: '{name}' is a pattern; the map names every symbol")
        if node in nodes_of.get(name, []):
            fail(f"{name} is named twice in {node}")
        nodes_of.setdefault(name, []).append(node)
        node_of[name] = node
    if parent and parent not in (n for n, _, _ in nodes):
        fail(f"{node} inherits {parent}, which is no node")
if nodes and (nodes[0][2] or (nodes[0][1].split("local:")[-1].strip().rstrip(";").strip()
                               != "*")):
    fail(f"the first node {nodes[0][0]} must inherit nothing and end with 'local: *;'")

# ---- the library ------------------------------------------------------------
exported = {}  # name -> its default version
versions = {}  # name -> {version: "@@" or "@"}
for line in run(["nm", "-D", "--defined-only", lib]).splitlines():
    parts = line.split()
    if len(parts) < 3 or parts[1] == "A":  # A: the version nodes themselves
        continue
    m = re.fullmatch(r"([^@]+)(@@?)(.*)", parts[2])
    if not m:
        fail(f"{parts[2]} is exported without a version")
        continue
    versions.setdefault(m.group(1), {})[m.group(3)] = m.group(2)
    if m.group(2) == "@@":
        exported[m.group(1)] = m.group(3)
for name, vers in sorted(versions.items()):
    if name not in node_of:
        fail(f"{name} is exported but not named in src/trapkit.map")
        continue
    if name not in exported:
        fail(f"{name} has no default version (only {sorted(vers)})")
    elif exported[name] != node_of[name]:
        fail(f"{name} is exported at {exported[name]}, the map puts it in {node_of[name]}")
    want = {n: "@" for n in nodes_of[name][:-1]}
    want[node_of[name]] = "@@"
    if vers != want:
        fail(f"{name} is exported as {sorted(k + v for v, k in vers.items())}, the map wants "
             f"{sorted(k + v for v, k in want.items())}")
for name in sorted(set(node_of) - set(exported)):
    fail(f"{name} is named in src/trapkit.map but the library does not define it")

# ---- the headers ------------------------------------------------------------
inc = os.path.join(src, "include")
decls = {}  # header -> functions declared extern
with tempfile.TemporaryDirectory() as tmp:
    tu = os.path.join(tmp, "all.c")
    with open(tu, "w") as f:
        for h in ("trapkit.h", "checkpoint.h", "aseq.h", "eh.h", "zpage.h", "guard.h", "lazy.h"):
            f.write(f"#include <trapkit/{h}>\n")
    aux = os.path.join(tmp, "all.aux")
    run(["cc", "-std=gnu11", "-fsyntax-only", "-I", inc, "-aux-info", aux, tu])
    with open(aux) as f:
        for line in f:
            m = re.match(r"/\* \S*/trapkit/(\w+\.h):\d+:NC \*/ extern .*?\b(tk_\w+) \(", line)
            if m:
                decls.setdefault(m.group(1), set()).add(m.group(2))
if sum(len(v) for v in decls.values()) < 45:
    fail(f"gcc -aux-info found too few declarations: {decls}")
eh_exported = {re.sub(r"@.*", "", l.split()[-1])
               for l in run(["nm", "-D", "--defined-only", eh_lib]).splitlines()}
for header, funcs in sorted(decls.items()):
    have = eh_exported if header == "eh.h" else exported
    for fn in sorted(funcs - set(have)):
        fail(f"{fn} (trapkit/{header}) is not exported by "
             f"{os.path.basename(eh_lib if header == 'eh.h' else lib)}"
             + ("" if header == "eh.h" else ": name it in src/trapkit.map, in a new node"))

# ---- a program linked against it binds versioned symbols ---------------------
with tempfile.TemporaryDirectory() as tmp:
    prog = os.path.join(tmp, "prog")
    c = os.path.join(tmp, "prog.c")
    with open(c, "w") as f:
        f.write("#include <trapkit/trapkit.h>\n"
                "int main(void) { return tk_init() != 0 || !tk_strerror(0); }\n")
    run(["cc", "-I", inc, c, "-o", prog, "-L", os.path.dirname(lib), "-ltrapkit",
         f"-Wl,-rpath,{os.path.dirname(lib)}"])
    dyn = run(["objdump", "-T", prog])
    for fn in ("tk_init", "tk_strerror"):
        m = re.search(rf"\s\(?([\w.]+)\)?\s+{fn}$", dyn, re.M)
        if not m or m.group(1) != node_of.get(fn):
            fail(f"the program binds {fn} at {m.group(1) if m else 'no version'}, "
                 f"not {node_of.get(fn)}")
    if os.path.exists(prog) and subprocess.run([prog]).returncode:
        fail("the program linked against the library failed")

if failures:
    print(f"install_symbols: {len(failures)} failures")
    sys.exit(1)
print(f"install_symbols: {len(exported)} symbols at {sorted(set(exported.values()))}, "
      f"{sum(len(v) for v in decls.values())} header functions: ok")
