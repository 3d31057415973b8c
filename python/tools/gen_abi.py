#!/usr/bin/env python3
"""Generates python/nnprim/_abi.py, the ctypes mirror of nnprim's C interface, from the public
headers: every struct (field for field), every enum constant and #define'd integer, the status
list, and each NN_API function's argument and return types. DLPack's structs come from
<dlpack/dlpack.h> (the one nnprim is built with).

    gen_abi.py [--include DIR] [--dlpack FILE] [--out FILE]     write the mirror
    gen_abi.py ... --check FILE                                 exit 1 when FILE is stale
    gen_abi.py ... --layout-c FILE                              a C program printing the layouts
    gen_abi.py ... --compare PROGRAM [--abi FILE]               the mirror against its output

The mirror is checked in (the package needs no compiler or headers to install); the python_abi
test regenerates it (--check: a header edited without regenerating fails) and compares every
struct size, field offset and constant with what the compiler says (--layout-c, --compare).
"""
import argparse
import ctypes
import difflib
import importlib.util
import os
import re
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# Parsed before HEADERS: their types are field types of the structs of conv.h and linear.h.
FIRST_HEADERS = ("activation.h",)
HEADERS = ("status.h", "tensor.h", "context.h", "mem.h", "backward.h", "conv.h", "pool.h",
           "linear.h", "softmax.h", "layernorm.h", "rnn.h", "optim.h", "plan_cache.h", "graph.h", "dlpack.h")

SCALARS = {
    "int": "c_int", "unsigned": "c_uint", "unsigned int": "c_uint", "int32_t": "c_int32",
    "uint32_t": "c_uint32", "int64_t": "c_int64", "uint64_t": "c_uint64", "size_t": "c_size_t",
    "uintptr_t": "c_size_t", "double": "c_double", "float": "c_float", "char": "c_char",
    "uint8_t": "c_uint8", "uint16_t": "c_uint16", "void": None,
}


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


class Abi:
    def __init__(self):
        self.consts = {}  # name -> int, in header order
        self.enums = {}  # enum type name -> [member names]
        self.structs = {}  # struct name -> [(field, ctype expression)]
        self.funcs = {}  # name -> (restype, [argtypes])
        self.statuses = []  # (name, value, description)
        self.opaque_fn = set()  # typedef'd function pointer types
        self.tagged = set()  # enums and structs declared without a typedef

    def value(self, expr):
        expr = re.sub(r"\b(0x[0-9a-fA-F]+|\d+)[uUlL]+\b", r"\1", expr.strip())
        return int(eval(expr, {"__builtins__": {}}, dict(self.consts)))

    def ctype(self, base, ptr, where):
        base = re.sub(r"\b(const|struct|enum)\b", " ", base).strip()
        base = " ".join(base.split())
        if ptr:
            if base == "char" and ptr == 1:
                return "c_char_p"
            return "c_void_p"
        if base in SCALARS:
            return SCALARS[base]
        if base in self.enums:
            return "c_int"
        if base in self.opaque_fn:
            return "c_void_p"
        if base in self.structs:
            return base
        raise SystemExit("gen_abi.py: %s: unknown type %r" % (where, base))

    def parse(self, text):
        for m in re.finditer(r"^\s*#\s*define\s+(\w+)\s+\(?\s*(-?\s*\d+)[uUlL]*\s*\)?\s*$", text, re.M):
            if not m.group(1).startswith("NN__"):
                self.consts[m.group(1)] = int(m.group(2).replace(" ", ""))
        for m in re.finditer(r'X\((NN_\w+),\s*(-?\d+),\s*"([^"]*)"\)', text):
            self.statuses.append((m.group(1), int(m.group(2)), m.group(3)))
            self.consts[m.group(1)] = int(m.group(2))
        body = strip_comments(text)
        body = "\n".join(line for line in body.splitlines() if not line.lstrip().startswith("#"))
        if self.statuses and "nn_status" not in self.enums:
            self.enums["nn_status"] = [s[0] for s in self.statuses]
        for m in re.finditer(r"typedef\s+\w+\s*\(\s*\*\s*(\w+)\s*\)\s*\([^)]*\)\s*;", body):
            self.opaque_fn.add(m.group(1))
        pos = 0
        pattern = re.compile(r"(?:typedef\s+)?\b(struct|enum)\s*(\w*)\s*\{|NN_API\s+([^;{]*?)\(([^;]*)\)\s*;")
        while True:
            m = pattern.search(body, pos)
            if not m:
                break
            if m.group(1):
                depth, i = 1, m.end()
                while depth:
                    depth += {"{": 1, "}": -1}.get(body[i], 0)
                    i += 1
                inner = body[m.end():i - 1]
                end = body.index(";", i)
                name = body[i:end].strip() or m.group(2)
                if not m.group(0).startswith("typedef"):
                    self.tagged.add(name)  # no typedef: C spells it "enum name"
                (self.enum if m.group(1) == "enum" else self.struct)(name, inner)
                pos = end + 1
            else:
                self.func(m.group(3), m.group(4))
                pos = m.end()

    def enum(self, name, inner):
        if "(" in inner:  # nn_status, from the X-macro list (read above)
            return
        members, nxt = [], 0
        for item in inner.split(","):
            item = item.strip()
            if not item:
                continue
            key, _, val = item.partition("=")
            key = key.strip()
            nxt = self.value(val) if val.strip() else nxt
            self.consts[key] = nxt
            members.append(key)
            nxt += 1
        self.enums[name] = members

    def decl(self, text, where):
        """(name, ctype expression) of one declaration such as 'const char *name[4]'."""
        text = " ".join(text.split())
        fn = re.match(r"(.*)\(\s*\*\s*(\w+)\s*\)\s*\(.*\)$", text)
        if fn:
            return fn.group(2), "c_void_p"
        m = re.match(r"(.*?)(\**)\s*(\w+)\s*((?:\[[^\]]+\])*)$", text.replace("* ", "*"))
        if not m:
            raise SystemExit("gen_abi.py: %s: cannot parse %r" % (where, text))
        base, stars, name, dims = m.groups()
        base = base.rstrip("* ")
        stars = len(stars) + len(m.group(1)) - len(m.group(1).rstrip("*"))
        t = self.ctype(base, stars, "%s.%s" % (where, name))
        for d in reversed(re.findall(r"\[([^\]]+)\]", dims)):
            t = "%s * %d" % (t, self.value(d))
            t = "(%s)" % t
        return name, t

    def struct(self, name, inner):
        fields = []
        for d in inner.split(";"):
            if not d.strip():
                continue
            if "(" not in d and "," in d:  # int a, b;
                first, *rest = d.split(",")
                base = re.match(r"\s*(.*?)[\s*]*\w+\s*(\[[^\]]*\]\s*)*$", first).group(1)
                fields.append(self.decl(first, name))
                for r in rest:
                    fields.append(self.decl(base + " " + r, name))
            else:
                fields.append(self.decl(d, name))
        self.structs[name] = fields

    def func(self, ret, args):
        ret = " ".join(ret.split())
        m = re.match(r"(.*?)(\**)\s*(\w+)$", ret.replace("* ", "*"))
        base, stars, name = m.groups()
        base = base.rstrip("* ")
        stars = len(stars) + len(base) - len(base.rstrip("*"))
        restype = self.ctype(base, stars, name)
        argtypes = []
        for a in args.split(","):
            a = " ".join(a.split())
            if a in ("void", ""):
                continue
            argtypes.append(self.decl(a, name)[1])
        self.funcs[name] = (restype, argtypes)


def load(include, dlpack):
    abi = Abi()
    if dlpack and os.path.exists(dlpack):
        with open(dlpack) as f:
            abi.parse(f.read())
    abi.funcs.clear()  # DLPack's own functions are none of nnprim's
    for h in FIRST_HEADERS + HEADERS:
        with open(os.path.join(include, "nnprim", h)) as f:
            abi.parse(f.read())
    return abi


def render(abi):
    out = ['"""ctypes mirror of nnprim\'s public headers (and DLPack\'s structs).',
           "",
           "Generated by python/tools/gen_abi.py from include/nnprim/*.h: do not edit; run",
           "`python3 python/tools/gen_abi.py` after a header change (the python_abi test fails",
           'until then)."""',
           "# flake8: noqa",
           "IMPORTS",
           ""]
    for k, v in abi.consts.items():
        out.append("%s = %d" % (k, v))
    out.append("")
    out.append("# status name -> (value, description), in nn_status order")
    out.append("STATUSES = {")
    for n, v, d in abi.statuses:
        out.append("    %r: (%d, %r)," % (n, v, d))
    out.append("}")
    out.append("")
    out.append("ENUMS = {")
    for n, members in abi.enums.items():
        out.append("    %r: %r," % (n, tuple(members)))
    out.append("}")
    for name, fields in abi.structs.items():
        out.append("")
        out.append("")
        out.append("class %s(Structure):" % name)
        out.append("    _fields_ = [")
        for f, t in fields:
            out.append("        (%r, %s)," % (f, t))
        out.append("    ]")
    out.append("")
    out.append("")
    out.append("STRUCTS = {%s}" % ", ".join("%r: %s" % (n, n) for n in abi.structs))
    out.append("")
    out.append("# function name -> (restype, argtypes); pointers are c_void_p (pass byref() or "
               "None)")
    out.append("FUNCTIONS = {")
    for name, (r, args) in abi.funcs.items():
        out.append("    %r: (%s, [%s])," % (name, r, ", ".join(args)))
    out.append("}")
    text = "\n".join(out) + "\n"
    used = sorted(set(re.findall(r"\b(c_\w+)\b", text)) | {"Structure"})
    imports = "\n".join(textwrap.wrap("from ctypes import (" + ", ".join(used) + ")", 99,
                                       subsequent_indent=" " * 20))
    return text.replace("IMPORTS", imports, 1)


def layout_c(abi):
    lines = ["/* Generated by python/tools/gen_abi.py: the layouts the ctypes mirror must match. */",
             "#include <stddef.h>", "#include <stdio.h>", "#include <nnprim/nnprim.h>"]
    has_dl = "DLTensor" in abi.structs
    if has_dl:
        lines.append("#include <dlpack/dlpack.h>")
    lines.append("int main(void)\n{")
    for name, fields in abi.structs.items():
        lines.append('    printf("size %s %%zu\\n", sizeof(%s));' % (name, name))
        for f, _ in fields:
            lines.append('    printf("field %s %s %%zu\\n", offsetof(%s, %s));' % (name, f, name, f))
    for name in abi.enums:
        if name != "nn_status":
            c = "enum " + name if name in abi.tagged else name
            lines.append('    printf("enumsize %s %%zu\\n", sizeof(%s));' % (name, c))
    for name in abi.consts:
        lines.append('    printf("const %s %%lld\\n", (long long)(%s));' % (name, name))
    lines.append("    return 0;\n}")
    return "\n".join(lines) + "\n"


def compare(program, abi_path):
    spec = importlib.util.spec_from_file_location("nnprim_abi", abi_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = subprocess.run([program], check=True, capture_output=True, text=True).stdout
    bad, n = [], 0
    seen = set()
    for line in out.splitlines():
        tok = line.split()
        n += 1
        if tok[0] == "size":
            got = ctypes.sizeof(mod.STRUCTS[tok[1]])
            if got != int(tok[2]):
                bad.append("sizeof(%s): C %s, ctypes %d" % (tok[1], tok[2], got))
        elif tok[0] == "field":
            f = getattr(mod.STRUCTS[tok[1]], tok[2])
            seen.add((tok[1], tok[2]))
            if f.offset != int(tok[3]):
                bad.append("offsetof(%s, %s): C %s, ctypes %d" % (tok[1], tok[2], tok[3], f.offset))
        elif tok[0] == "enumsize":
            if int(tok[2]) != ctypes.sizeof(ctypes.c_int):
                bad.append("sizeof(%s) is %s: the mirror's c_int is wrong" % (tok[1], tok[2]))
        elif tok[0] == "const":
            if getattr(mod, tok[1], None) != int(tok[2]):
                bad.append("%s: C %s, mirror %r" % (tok[1], tok[2], getattr(mod, tok[1], None)))
        else:
            bad.append("unknown line %r" % line)
    for name, cls in mod.STRUCTS.items():
        for f in cls._fields_:
            if (name, f[0]) not in seen:
                bad.append("%s.%s: in the mirror, not printed by the C program" % (name, f[0]))
    for b in bad:
        print("python_abi: MISMATCH " + b)
    print("python_abi: %d lines of %s compared with %s, %d mismatches" %
          (n, program, abi_path, len(bad)))
    return 1 if bad else 0


def find_dlpack():
    """<dlpack/dlpack.h> where the compiler looks: /usr/include, then CPATH and C_INCLUDE_PATH."""
    dirs = ["/usr/include"] + [d for v in ("CPATH", "C_INCLUDE_PATH")
                               for d in os.environ.get(v, "").split(os.pathsep) if d]
    for d in dirs:
        path = os.path.join(d, "dlpack", "dlpack.h")
        if os.path.exists(path):
            return path
    return "/usr/include/dlpack/dlpack.h"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--include", default=os.path.join(ROOT, "include"))
    ap.add_argument("--dlpack", default=find_dlpack())
    ap.add_argument("--out", default=os.path.join(ROOT, "python", "nnprim", "_abi.py"))
    ap.add_argument("--check", metavar="FILE")
    ap.add_argument("--layout-c", metavar="FILE")
    ap.add_argument("--compare", metavar="PROGRAM")
    ap.add_argument("--abi", default=os.path.join(ROOT, "python", "nnprim", "_abi.py"))
    a = ap.parse_args()
    if a.layout_c:
        # a build step: without DLPack's header the program leaves its structs out (and the test
        # below skips), so that a build without libdlpack-dev still builds
        with open(a.layout_c, "w") as f:
            f.write(layout_c(load(a.include, a.dlpack)))
        return 0
    if not os.path.exists(a.dlpack):
        # The mirror has DLPack's structs; without the header it would differ for that reason
        print("python_abi: skipped: %s not found (Debian's libdlpack-dev)" % a.dlpack)
        return 77
    rc = 0
    abi = load(a.include, a.dlpack)
    text = render(abi)
    if a.check:
        with open(a.check) as f:
            old = f.read()
        ver = [re.search(r"^DLPACK_VERSION = (\d+)$", t, re.M) for t in (old, text)]
        if ver[0] and ver[1] and ver[0].group(1) != ver[1].group(1):
            # another DLPack than the mirror was made with (Debian's 0.6): not a stale mirror
            print("python_abi: skipped: %s is DLPack %s, the mirror was generated with %s" %
                  (a.dlpack, ver[1].group(1), ver[0].group(1)))
            return 77
        if old != text:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True),
                                                       a.check, "regenerated"))
            print("python_abi: %s is stale: run python3 python/tools/gen_abi.py" % a.check)
            rc = 1
        else:
            print("python_abi: %s matches the headers" % a.check)
    if a.compare:
        rc |= compare(a.compare, a.check or a.abi)
    if not a.check and not a.compare:
        with open(a.out, "w") as f:
            f.write(text)
    return rc


if __name__ == "__main__":
    sys.exit(main())
