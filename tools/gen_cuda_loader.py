#!/usr/bin/env python3
"""Generate nnprim's run-time bindings of the CUDA runtime, cuDNN and cuBLASLt (dlopen/dlsym).

Run by the build (src/meson.build), not by hand: the prototypes come from the headers the build
compiles against, preprocessed by the build's own C compiler, so the wrappers always match them.
For every function named in the spec (tools/cuda_loader_spec.txt) it writes:

  cuda_load_gen.h  a declaration nn__dl_<name> of the same type as <name> (__typeof__), then
                   '#define <name> nn__dl_<name>', so that code including core/cuda_api.h keeps
                   calling cudaMalloc(...) and reaches the wrapper (skipped where the includer
                   defines NN__DL_NO_RENAME: the generated source and the loader);
  cuda_load_gen.c  one function pointer per name, filled by the loader (src/core/cuda_load.c)
                   through a table per library, and the wrapper: when its library is not usable
                   it returns the library's "not initialized" status (or 0, or the loader's
                   explanation for a function returning text) instead of calling through NULL.

Usage: gen_cuda_loader.py --spec FILE --libs cudart[,cudnn,cublasLt] --out DIR -- CC [ARGS...]
(CC ARGS... preprocess a file including the libraries' headers; the output goes to stdout.)
Standard library only.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

# Per library: the header that declares its functions, the enum value of its loader slot
# (src/core/cuda_load.h), and what a wrapper returns, by return type, when the library is absent.
LIBS = {
    "cudart": ("cuda_runtime_api.h", "NN__DL_CUDART"),
    "cudnn": ("cudnn.h", "NN__DL_CUDNN"),
    "cublasLt": ("cublasLt.h", "NN__DL_CUBLASLT"),
}
ABSENT = {
    "cudaError_t": "cudaErrorSharedObjectInitFailed",
    "cudnnStatus_t": "CUDNN_STATUS_NOT_INITIALIZED",
    "cublasStatus_t": "CUBLAS_STATUS_NOT_INITIALIZED",
    "size_t": "0",
}


class GenError(Exception):
    pass


def parse_spec(path):
    """{library: [function, ...]} in spec order."""
    funcs, lib = {}, None
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            words = line.split()
            if words[0] == "library":
                if len(words) != 2 or words[1] not in LIBS:
                    raise GenError("%s:%d: 'library NAME', NAME one of %s"
                                   % (path, lineno, ", ".join(LIBS)))
                lib = words[1]
                funcs.setdefault(lib, [])
                continue
            if lib is None:
                raise GenError("%s:%d: a function before any 'library' line" % (path, lineno))
            for w in words:
                if not re.match(r"^\w+$", w):
                    raise GenError("%s:%d: '%s' is not a function name" % (path, lineno, w))
                funcs[lib].append(w)
    return funcs


def preprocess(cc, libs):
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "headers.c")
        with open(src, "w", encoding="utf-8") as f:
            for lib in libs:
                f.write("#include <%s>\n" % LIBS[lib][0])
        try:
            r = subprocess.run(cc + ["-E", "-P", src], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, universal_newlines=True, check=False)
        except OSError as e:
            raise GenError("cannot run %s: %s" % (cc[0], e.strerror))
        if r.returncode != 0:
            raise GenError("preprocessing the headers failed:\n%s" % r.stderr)
        return r.stdout


def strip_attributes(text):
    """Drop __attribute__((...)) and __declspec(...) groups (balanced parentheses)."""
    out, i = [], 0
    while True:
        m = re.compile(r"\b(__attribute__|__declspec)\s*\(").search(text, i)
        if not m:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:m.start()])
        depth, j = 0, m.end() - 1
        while j < len(text):
            if text[j] == "(":
                depth += 1
            elif text[j] == ")":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        i = j + 1


def split_params(args):
    parts, depth, cur = [], 0, ""
    for ch in args:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch in "(["
        depth -= ch in ")]"
        cur += ch
    parts.append(cur)
    return [" ".join(p.split()) for p in parts]


def param_name(p, fname):
    m = re.search(r"\(\s*\*\s*(\w+)\s*\)", p)  # a function-pointer parameter
    if m:
        return m.group(1)
    m = re.search(r"(\w+)\s*(\[[^\]]*\]\s*)*$", p)
    words = p.replace("*", " ").split()
    if not m or len(words) < 2 or m.group(1) in ("const", "volatile", "restrict"):
        raise GenError("%s: parameter '%s' has no name" % (fname, p))
    return m.group(1)


def find_prototype(text, fname):
    """(return type, parameter text, [parameter names]) of fname's declaration."""
    for m in re.finditer(r"\b%s\s*\(" % re.escape(fname), text):
        start = max(text.rfind(c, 0, m.start()) for c in ";{}") + 1
        ret = " ".join(strip_attributes(text[start:m.start()]).split())
        words = ret.split()
        if not words or "typedef" in words or "(" in ret or "=" in ret:
            continue
        ret = " ".join(w for w in words if w not in ("extern", "__extension__"))
        depth, j = 0, m.end() - 1
        while j < len(text):
            depth += text[j] == "("
            depth -= text[j] == ")"
            if depth == 0:
                break
            j += 1
        args = " ".join(text[m.end():j].split())
        rest = strip_attributes(text[j + 1:j + 400]).lstrip()
        if not rest.startswith(";"):
            continue  # a definition or a call, not the declaration
        params = [] if args in ("", "void") else split_params(args)
        return ret, args or "void", [param_name(p, fname) for p in params]
    raise GenError("%s is not declared in the headers" % fname)


def absent_value(ret, fname, lib):
    if ret == "void":
        return None
    if ret in ABSENT:
        return ABSENT[ret]
    if ret == "const char *" or ret == "const char*":
        return "nn__dl_problem(%s)" % LIBS[lib][1]
    raise GenError("%s returns '%s': the generator does not know what it returns when %s is "
                   "absent (add it to ABSENT)" % (fname, ret, lib))


HEAD = "/* Generated by tools/gen_cuda_loader.py from tools/cuda_loader_spec.txt and the headers the\n" \
       " * build compiles against. Do not edit. */\n"


def emit(funcs, protos):
    h = [HEAD, "#ifndef NN_CUDA_LOAD_GEN_H", "#define NN_CUDA_LOAD_GEN_H", ""]
    c = [HEAD, "/* clang-format off */", "#define NN__DL_NO_RENAME", "#include \"core/cuda_load.h\"", ""]
    for lib, names in funcs.items():
        h.append("/* %s */" % lib)
        for n in names:
            h.append("__typeof__(%s) nn__dl_%s;" % (n, n))
        h.append("")
    h.append("#ifndef NN__DL_NO_RENAME")
    for lib, names in funcs.items():
        for n in names:
            h.append("#define %s nn__dl_%s" % (n, n))
    h += ["#endif", "", "#endif"]
    for lib, names in funcs.items():
        slot = LIBS[lib][1]
        for n in names:
            c.append("static __typeof__(%s) *p_%s;" % (n, n))
        c.append("")
        c.append("const struct nn__dl_symbol nn__dl_symbols_%s[] = {" % lib)
        for n in names:
            c.append("    {\"%s\", (void *)&p_%s}," % (n, n))
        c.append("    {NULL, NULL},")
        c.append("};")
        for n in names:
            ret, args, pnames = protos[n]
            c.append("")
            c.append("%s nn__dl_%s(%s)" % (ret, n, args))
            c.append("{")
            call = "p_%s(%s)" % (n, ", ".join(pnames))
            absent = absent_value(ret, n, lib)
            if absent is None:
                c.append("    if (nn__dl_ready(%s)) %s;" % (slot, call))
            else:
                c.append("    if (!nn__dl_ready(%s)) return %s;" % (slot, absent))
                c.append("    return %s;" % call)
            c.append("}")
        c.append("")
    return "\n".join(h) + "\n", "\n".join(c).rstrip("\n") + "\n"


def main(argv):
    if "--" not in argv:
        print("gen_cuda_loader.py: error: the compiler command follows '--'", file=sys.stderr)
        return 2
    cut = argv.index("--")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spec", required=True)
    ap.add_argument("--libs", required=True, help="comma-separated: cudart,cudnn,cublasLt")
    ap.add_argument("--out", required=True, help="directory for cuda_load_gen.h and .c")
    a = ap.parse_args(argv[:cut])
    cc = argv[cut + 1:]
    try:
        libs = [l for l in a.libs.split(",") if l]
        for l in libs:
            if l not in LIBS:
                raise GenError("unknown library '%s'" % l)
        spec = parse_spec(a.spec)
        funcs = {l: spec.get(l, []) for l in libs}
        text = preprocess(cc, libs)
        protos = {n: find_prototype(text, n) for names in funcs.values() for n in names}
        header, source = emit(funcs, protos)
        os.makedirs(a.out, exist_ok=True)
        for name, body in (("cuda_load_gen.h", header), ("cuda_load_gen.c", source)):
            with open(os.path.join(a.out, name), "w", encoding="utf-8", newline="\n") as f:
                f.write(body)
    except GenError as e:
        print("gen_cuda_loader.py: error: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
