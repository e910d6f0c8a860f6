#!/usr/bin/env python3
"""The module map of the crate, as figures: modules and lines; imports back up (a module that
names an item of one of its ancestors); circles (groups of sibling modules that import each
other, found as strongly connected components of the import graph among each module's
children); `Runner`'s fields, methods and files; and the files (tests aside) that name each of
three settings in any spelling. Reads the sources as text: paths spelt out (`crate::`,
`super::`, `self::`, use groups), not what a re-export hides.

usage: python3 scripts/module-map.py [SRC_DIR] [-v]   (SRC_DIR: src of this checkout)"""
import os, re, sys
from collections import defaultdict

args = [a for a in sys.argv[1:] if a != '-v']
src = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'src')
verbose = '-v' in sys.argv

def modpath(rel):
    parts = rel[:-3].split('/')
    if parts[-1] in ('mod', 'lib', 'main'):
        parts = parts[:-1]
    return tuple(parts)

files = {}
for root, _, names in os.walk(src):
    for n in names:
        if n.endswith('.rs'):
            rel = os.path.relpath(os.path.join(root, n), src)
            if rel.startswith('bin/'):
                continue
            files[rel] = modpath(rel)
mods = set(files.values())
# modules declared inline (mod x { }) are ignored: they count as their file.

def strip(code):
    code = code.split('#[cfg(test)]')[0]
    code = re.sub(r'//[^\n]*', '', code)
    code = re.sub(r'/\*.*?\*/', '', code, flags=re.S)
    code = re.sub(r'r#*"(?:.|\n)*?"#*', '""', code)
    code = re.sub(r'"(?:\\.|[^"\\])*"', '""', code)
    return code

def expand(prefix, body):
    # body of a brace group: split at top-level commas
    out, depth, cur = [], 0, ''
    for ch in body:
        if ch == '{': depth += 1
        if ch == '}': depth -= 1
        if ch == ',' and depth == 0:
            out.append(cur.strip()); cur = ''
        else:
            cur += ch
    if cur.strip(): out.append(cur.strip())
    res = []
    for item in out:
        m = re.match(r'^([\w:]*?)::\{(.*)\}$', item, re.S)
        if m:
            res += expand(prefix + '::' + m.group(1), m.group(2))
        elif re.match(r'^[\w:]+', item):
            res.append(prefix + '::' + re.match(r'^[\w:]+', item).group(0))
    return res

def refs(code):
    out = []
    for m in re.finditer(r'\b((?:crate|super|self)(?:::(?:super|\w+))*)::\{', code):
        start = m.end(); depth = 1; i = start
        while depth and i < len(code):
            if code[i] == '{': depth += 1
            elif code[i] == '}': depth -= 1
            i += 1
        out += expand(m.group(1), code[start:i-1])
    for m in re.finditer(r'(?<![\w:])((?:crate|super|self)(?:::(?:super|\w+))+)', code):
        out.append(m.group(1))
    return out

def resolve(frm, path):
    segs = path.split('::')
    if segs[0] == 'crate':
        base = (); segs = segs[1:]
    else:
        base = frm
        if segs[0] == 'self':
            segs = segs[1:]
        while segs and segs[0] == 'super':
            base = base[:-1]; segs = segs[1:]
    target = base
    for s in segs:
        if target + (s,) in mods:
            target = target + (s,)
        else:
            break
    return target

edges = set()
backup = []
for rel, frm in files.items():
    if re.search(r'(^|/)tests?(/|\.rs$)|_tests?\.rs$', rel):
        continue
    code = strip(open(os.path.join(src, rel)).read())
    for p in refs(code):
        t = resolve(frm, p)
        if t == frm:
            continue
        if frm[:len(t)] == t:
            if len(t) < len(frm) and len(frm) > 1 and t != ():
                backup.append((rel, '::'.join(t), p))
            continue
        if t[:len(frm)] == frm:
            continue  # into its own child
        k = 0
        while k < min(len(frm), len(t)) and frm[k] == t[k]:
            k += 1
        edges.add((frm[:k+1], t[:k+1]))

# strongly connected components over each parent's children
graph = defaultdict(set)
for a, b in edges:
    graph[a].add(b)
nodes = set(graph) | {b for s in graph.values() for b in s}
index = {}; low = {}; stack = []; on = set(); sccs = []; counter = [0]
sys.setrecursionlimit(10000)
def strong(v):
    index[v] = low[v] = counter[0]; counter[0] += 1; stack.append(v); on.add(v)
    for w in graph[v]:
        if w not in index:
            strong(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop(); on.discard(w); comp.append(w)
            if w == v: break
        if len(comp) > 1: sccs.append(sorted(comp))
for v in sorted(nodes):
    if v not in index: strong(v)

lines = sum(sum(1 for _ in open(os.path.join(src, r))) for r in files)
print(f"files {len(files)}, modules {len(mods)}, lines {lines}")
tops = sorted({m[0] for m in mods if m})
print(f"top-level modules {len(tops)}")
files_up = sorted({r for r, _, _ in backup})
print(f"imports back up (a module naming an item of an ancestor): {len(backup)} in {len(files_up)} files")
by_top = defaultdict(int)
for r, _, _ in backup: by_top[r.split('/')[0]] += 1
print("  by folder: " + ", ".join(f"{k} {v}" for k, v in sorted(by_top.items(), key=lambda x: -x[1])))
print(f"circles (groups of sibling modules that import each other): {len(sccs)}, modules in them: {sum(len(c) for c in sccs)}")
for c in sccs:
    print("  " + " <-> ".join('::'.join(m) for m in c))
    if verbose:
        for a, b in sorted(edges):
            if a in c and b in c: print("     ", '::'.join(a), '->', '::'.join(b))
if verbose:
    for b in backup: print("  up:", *b)

# The runner: fields of `struct Runner`, files with `impl Runner`, methods in them.
fields = 0; impl_files = []; methods = 0
for rel in sorted(files):
    text = open(os.path.join(src, rel)).read().split('#[cfg(test)]')[0]
    m = re.search(r'\n(?:pub(?:\([a-z]+\))? )?struct Runner \{\n(.*?)\n\}', text, re.S)
    if m:
        fields = len(re.findall(r'^    (?:pub(?:\([a-z]+\))? )?\w+:', m.group(1), re.M))
    found = False
    for b in re.finditer(r'\nimpl Runner \{\n(.*?)\n\}', text, re.S):
        found = True
        methods += len(re.findall(r'^    (?:pub(?:\([a-z:]+\))? )?(?:const )?fn \w+', b.group(1), re.M))
    if found: impl_files.append(rel)
print(f"Runner: {fields} fields, {methods} methods in {len(impl_files)} files")

# The files (tests aside) that name each setting, in any spelling: in their text, comments too,
# and in their code alone.
settings = {"STEP_TIMEOUT": r"\b(STEP_TIMEOUT(_MIN)?|StepTimeout(Min)?|step_timeout)\b",
            "MAX_RETRIES": r"\b(MAX_RETRIES|MaxRetries|max_retries)\b",
            "the sandbox's read list": r"\b(SANDBOX_READ|SandboxRead|sandbox_read)\b"}
plain = [r for r in files if not re.search(r'(^|/)tests?(/|\.rs$)|_tests?\.rs$', r)]
for name, pat in settings.items():
    text = code = 0
    named = []
    for rel in sorted(plain):
        s = open(os.path.join(src, rel)).read().split('#[cfg(test)]')[0]
        if re.search(pat, s):
            text += 1
        if re.search(pat, re.sub(r'//[^\n]*', '', s)):
            code += 1
            named.append(rel)
    print(f"files naming {name}: {text} (comments too), {code} in code")
    if verbose:
        print("  " + ", ".join(named))
