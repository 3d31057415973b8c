#!/usr/bin/env python3
"""Every op family's registration points (docs/ADDING_AN_OP.md) are in place.

    check_families.py [ROOT]      exit 0 when every point of every family is found, else 1

One row of FAMILIES per family; each point is a file that must exist or a text a file must
hold. A missing point prints "<family>: <point>: <what is missing>". The meson test `families`
runs it (tests/meson.build).
"""
import fnmatch
import os
import re
import sys

# name: the family (cli `check`/`bench` area, case syntax, verbose op prefix); dir: src/<dir>,
# tests/<dir>; header: include/nnprim/<header>; doc: docs/<doc>; kinds: its cache kinds, listed in
# src/context.c; parity: the *_cases function of tools/torch_parity.py; torch: its autograd
# Function in python/nnprim/torch.py; core: its method in python/nnprim/core.py.
FAMILIES = [
    dict(name="conv", dir="conv", header="conv.h", doc="CONV.md",
         kinds=["nn__conv_plan_kind", "nn__conv_ones_kind"], parity="conv_cases",
         torch="_ConvFn", core="conv_backward"),
    dict(name="pool", dir="pool", header="pool.h", doc="POOL.md", kinds=[],
         parity="pool_cases", torch="_PoolFn", core="pool_backward"),
    dict(name="linear", dir="linear", header="linear.h", doc="LINEAR.md",
         kinds=["nn__linear_matmul_kind"], parity="linear_cases", torch="_LinearFn",
         core="linear_backward"),
    dict(name="softmax", dir="softmax", header="softmax.h", doc="SOFTMAX.md",
         kinds=["nn__softmax_xent_kind"], parity="softmax_cases", torch="_XentFn",
         core="softmax_backward"),
    dict(name="layernorm", dir="layernorm", header="layernorm.h", doc="LAYERNORM.md", kinds=[],
         parity="layernorm_cases", torch="_LayerNormFn", core="layernorm_backward"),
    dict(name="rnn", dir="rnn", header="rnn.h", doc="RNN.md",
         kinds=["nn__rnn_cudnn_kind", "nn__rnn_cudnn_dropout_kind"], parity="rnn_cases",
         torch="_RnnFn", core="rnn_backward"),
]


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    cache = {}

    def text(path):
        if path not in cache:
            try:
                with open(os.path.join(root, path), encoding="utf-8") as f:
                    cache[path] = f.read()
            except OSError:
                cache[path] = None
        return cache[path]

    missing = []

    def need_file(fam, point, path):
        if text(path) is None:
            missing.append("%s: %s: %s does not exist" % (fam, point, path))
            return False
        return True

    def need_text(fam, point, path, pattern, what):
        t = text(path)
        if t is None:
            missing.append("%s: %s: %s does not exist" % (fam, point, path))
        elif not re.search(pattern, t, re.M):
            missing.append("%s: %s: %s has no %s" % (fam, point, path, what))

    exported = re.findall(r"^\s*global:\s*\n((?:\s*[^\s;]+;\s*\n)+)", text("src/nnprim.map") or "",
                          re.M)
    globs = re.findall(r"([^\s;]+);", exported[0]) if exported else []

    for f in FAMILIES:
        n, d, h = f["name"], f["dir"], f["header"]
        hp = "include/nnprim/" + h
        if need_file(n, "public header", hp):
            api = re.findall(r"^NN_API\s[^(]*?\b(nn_\w+)\s*\(", text(hp), re.M)
            if not api:
                missing.append("%s: public header: %s declares no NN_API function" % (n, hp))
            for fn in api:
                if not any(fnmatch.fnmatchcase(fn, g) for g in globs):
                    missing.append("%s: export: %s is not exported by src/nnprim.map" % (n, fn))
            if "_backward_ex" in text(hp):
                need_text(n, "backward options", "include/nnprim/backward.h",
                          r"^ \*\s.*\b%s\b" % n, "line naming the family's accumulate bits")
        need_text(n, "public header list", "include/nnprim/meson.build", r"'%s'" % re.escape(h),
                  "'%s' in nn_public_headers" % h)
        need_text(n, "umbrella header", "include/nnprim/nnprim.h",
                  r'#include "%s"' % re.escape(h), '#include "%s"' % h)
        need_file(n, "sources", "src/%s/meson.build" % d)
        need_text(n, "sources", "src/meson.build", r"^subdir\('%s'\)" % d, "subdir('%s')" % d)
        need_text(n, "backend table", "src/%s/%s.c" % (d, d), r"\b(backend_of|pick_backend)\(",
                  "backend_of() or pick_backend()")
        # The verbose note travels as an argument: no thread-local state in a family's folder.
        fdir = os.path.join(root, "src", d)
        for fn in sorted(os.listdir(fdir)) if os.path.isdir(fdir) else []:
            if not fn.endswith((".c", ".h")):
                continue
            code = re.sub(r"/\*.*?\*/|//[^\n]*", " ", text("src/%s/%s" % (d, fn)) or "", flags=re.S)
            if re.search(r"\b(_Thread_local|thread_local|__thread)\b", code):
                missing.append("%s: verbose note: src/%s/%s has thread-local state; pass the "
                               "note as an argument" % (n, d, fn))
        for k in f["kinds"]:
            need_text(n, "cache kind", "src/context.c", r"&%s\b" % k, "%s in cache_kinds[]" % k)
        need_file(n, "tests", "tests/%s/meson.build" % d)
        need_text(n, "tests", "tests/meson.build", r"^subdir\('%s'\)" % d, "subdir('%s')" % d)
        need_file(n, "harness", "tests/harness/%s_case.c" % n)
        need_text(n, "harness", "cli/meson.build", r"%s_case\.c" % n, "%s_case.c" % n)
        need_text(n, "nnprim check", "cli/check.c", r'"%s"' % n, '"%s"' % n)
        need_file(n, "bench", "cli/bench_%s.c" % n)
        need_text(n, "bench", "cli/main.c", r'\{"%s", nn_cli_bench_%s\}' % (n, n),
                  "bench_areas[] row for %s" % n)
        need_file(n, "catalogue", "tests/catalogue/catalogue_%s.c" % n)
        need_text(n, "catalogue", "tests/catalogue/meson.build", r"catalogue_%s\.c" % n,
                  "catalogue_%s.c" % n)
        need_text(n, "mutations", "tests/catalogue/test_mutations.c",
                  r"Test\(mutations, %s_" % n, "Test(mutations, %s_...)" % n)
        need_text(n, "verbose round trip", "tests/cli/test_cli_verbose.c",
                  r"Test\(cli_verbose, %s_lines_are_reproducers\)" % n,
                  "Test(cli_verbose, %s_lines_are_reproducers)" % n)
        need_text(n, "parity with PyTorch", "tools/torch_parity.py", r"^def %s\(" % f["parity"],
                  "def %s()" % f["parity"])
        need_text(n, "python abi", "python/nnprim/_abi.py", r"^class nn_%s_params\(" % n,
                  "class nn_%s_params" % n)
        need_text(n, "python package", "python/nnprim/core.py", r"def %s\(" % f["core"],
                  "def %s()" % f["core"])
        need_text(n, "python package", "python/nnprim/torch.py", r"^class %s\(" % f["torch"],
                  "class %s" % f["torch"])
        need_file(n, "doc", "docs/" + f["doc"])
        need_text(n, "doc", "docs/VERBOSE.md", r"\b%s_forward\b" % n, "%s_forward line" % n)
        need_text(n, "doc", "docs/INPUT.md", r"\b%s\b" % n, "mention of %s" % n)
        need_text(n, "doc", "docs/ADDING_AN_OP.md", r"\b%s\b" % n, "mention of %s" % n)

    # Cache kind ids are written to plan files: no two kinds may share one. Every id, retired ones
    # too, is a #define of src/cudnn/cache_kinds.h (NN__..._KIND_ID 7u); a kind's `.id = ` names
    # one of them (a kind may be defined twice from one constant: a key-only view of it).
    ids_h = "src/cudnn/cache_kinds.h"
    id_re = r"^#define\s+(NN__\w*KIND\w*_ID)\s+(\d+)u?\b"
    defined = dict(re.findall(id_re, text(ids_h) or "", re.M))
    if not defined:
        missing.append("cache kind ids: %s defines no NN__..._KIND_ID" % ids_h)
    seen = {}
    for name, value in defined.items():
        seen.setdefault(int(value), []).append(name)
    for value, names in sorted(seen.items()):
        if len(names) > 1:
            missing.append("cache kind ids: id %d is declared by %s" % (value, ", ".join(names)))
    for top, _, names in os.walk(os.path.join(root, "src")):
        for fn in sorted(names):
            if not fn.endswith((".c", ".h")):
                continue
            rel = os.path.relpath(os.path.join(top, fn), root)
            if rel == ids_h:
                continue
            t = text(rel) or ""
            for m in re.finditer(id_re, t, re.M):
                missing.append("cache kind ids: %s defines %s; ids live in %s" %
                               (rel, m.group(1), ids_h))
            for m in re.finditer(r"\.id\s*=\s*(\w+)", t):
                if m.group(1) not in defined:
                    missing.append("cache kind ids: %s has .id = %s, not an id of %s" %
                                   (rel, m.group(1), ids_h))

    for m in missing:
        print(m)
    print("families: %d families, %s" % (len(FAMILIES),
                                         "%d failed checks" % len(missing) if missing else
                                         "every registration point found"))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
