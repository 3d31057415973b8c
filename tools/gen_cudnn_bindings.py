#!/usr/bin/env python3
"""Generate nnprim's checked cuDNN wrappers (src/cudnn/bindings_cudnn.h/.c).

Reads the prototypes of the functions named in a spec (tools/cudnn_spec.txt) from the cuDNN headers
and writes, for each, nn_status nn__cudnn_<Name>(struct nn_ctx *ctx, <cuDNN's own arguments>):
a macro that passes the call site to nn__cudnn_<Name>_at(). On failure the wrapper records the
function, cuDNN's status name, cudnnGetLastErrorString() and the call site; at verbose level 2 it
traces the call with its arguments (enums by name where the spec asks, host arrays in full,
output scalars after the call) and its host duration (calls that launch GPU work return before
the work ends); in NN_DEBUG_CHECKS builds it checks that
device-pointer arguments point to device memory.

Argument types are copied from the header, never rewritten, so every size stays as wide as cuDNN
declares it. The output depends only on the spec and the parsed prototypes (plus the header
version, recorded in the output), so regenerating it is a reproducible check.

Usage: gen_cudnn_bindings.py --include DIR [--spec FILE] --out DIR
Standard library only.
"""

import argparse
import os
import re
import sys

HEADERS = ["cudnn_graph_v9.h", "cudnn_ops_v9.h", "cudnn_cnn_v9.h", "cudnn_adv_v9.h"]

SIGNED = {"int", "int32_t", "int64_t", "long", "long long", "short"}
UNSIGNED = {"size_t", "uint32_t", "uint64_t", "unsigned", "unsigned int", "unsigned long",
            "unsigned long long"}
FLOATING = {"float", "double"}
ARRAY_ELEMS = {"int": "int", "int32_t": "int", "int64_t": "i64"}


class GenError(Exception):
    pass


def strip_c(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"^\s*#.*?(?<!\\)$", " ", text, flags=re.M)
    text = text.replace('extern "C"', " ")
    return text


def parse_headers(incdir):
    # cudaStream_t comes from CUDA's driver_types.h, not from cuDNN's headers: an opaque pointer.
    protos, enums, handles = {}, {}, {"cudaStream_t"}
    version = None
    vpath = os.path.join(incdir, "cudnn_version_v9.h")
    if not os.path.exists(vpath):
        vpath = os.path.join(incdir, "cudnn_version.h")
    try:
        with open(vpath, encoding="utf-8") as f:
            vtext = f.read()
        parts = [re.search(r"#define\s+CUDNN_%s\s+(\d+)" % k, vtext)
                 for k in ("MAJOR", "MINOR", "PATCHLEVEL")]
        if all(parts):
            version = tuple(int(p.group(1)) for p in parts)
    except OSError:
        pass
    if version is None:
        raise GenError("cannot read the cuDNN version from %s" % vpath)
    for name in HEADERS:
        path = os.path.join(incdir, name)
        try:
            with open(path, encoding="utf-8") as f:
                text = strip_c(f.read())
        except OSError as e:
            raise GenError("cannot read %s: %s" % (path, e.strerror))
        for m in re.finditer(r"typedef\s+enum\s*\w*\s*\{([^}]*)\}\s*(\w+)", text):
            enums[m.group(2)] = m.group(1)
        for m in re.finditer(r"typedef\s+(?:struct\s+\w+|void)\s*\*\s*(\w+)", text):
            handles.add(m.group(1))
        for stmt in text.split(";"):
            if "CUDNNWINAPI" not in stmt or "(" not in stmt:
                continue
            stmt = re.split(r"[{}]", stmt)[-1]
            m = re.match(r"\s*(.*?)\s*CUDNNWINAPI\s+(\w+)\s*\((.*)\)\s*$", stmt, flags=re.S)
            if not m:
                continue
            ret = " ".join(m.group(1).replace("CUDNN_DEPRECATED", " ").split())
            args = " ".join(m.group(3).split())
            protos[m.group(2)] = (ret, args)
    return version, protos, enums, handles


def parse_param(text, fname):
    """'const int dimA[]' -> dict(decl, name, base, depth, const)."""
    text = text.strip()
    m = re.match(r"^(.*?)(\w+)\s*(\[\s*\])?$", text)
    if not m or not m.group(1).strip():
        raise GenError("%s: cannot parse parameter '%s'" % (fname, text))
    typ, name = m.group(1), m.group(2)
    depth = typ.count("*") + (1 if m.group(3) else 0)
    words = typ.replace("*", " ").split()
    const = "const" in words
    base = " ".join(w for w in words if w != "const")
    # The wrapper's parameter: the header's own spelling, arrays written as pointers.
    decl = typ.strip() + ("" if typ.rstrip().endswith("*") else " ") + name
    if m.group(3):
        decl = typ.strip() + " *" + name
    return {"decl": decl, "name": name, "base": base, "depth": depth, "const": const}


def enum_values(tname, body):
    """[(NAME, value)] of an enum body, first name per value, deprecated names and aliases left
    out (implicit values still count them)."""
    out, seen, nxt = [], set(), 0
    for item in body.split(","):
        item = item.strip()
        if not item:
            continue
        m = re.match(r"^(\w+)(\s+CUDNN_DEPRECATED_ENUM)?\s*(?:=\s*(.+))?$", item, flags=re.S)
        if not m:
            raise GenError("%s: cannot parse enumerator '%s'" % (tname, item))
        expr = m.group(3)
        if expr is None:
            value = nxt
        elif re.match(r"^-?(0x[0-9a-fA-F]+|\d+)$", expr.strip()):
            value = int(expr.strip(), 0)
        else:
            continue  # an alias of another enumerator
        nxt = value + 1
        if m.group(2) or value in seen:
            continue
        seen.add(value)
        out.append((m.group(1), value))
    return out


def name_fn(tname):
    short = tname[len("cudnn"):] if tname.startswith("cudnn") else tname
    return "nn__cudnn_%s_name" % (short[:-2] if short.endswith("_t") else short)


def parse_spec(path):
    funcs, uses, names = [], [], []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            words = line.split()
            if words[0] == "uses":
                if len(words) < 3:
                    raise GenError("%s:%d: 'uses NAME RETURN-TYPE'" % (path, lineno))
                uses.append((words[1], " ".join(words[2:]), lineno))
                continue
            if words[0] == "names":
                names += [(w, lineno) for w in words[1:]]
                continue
            kinds = {}
            for w in words[1:]:
                m = re.match(r"^(\w+):(dev|in|out|in\[(\w+)\])$", w)
                if not m:
                    raise GenError("%s:%d: bad argument entry '%s'" % (path, lineno, w))
                kinds[m.group(1)] = ("in", m.group(3)) if m.group(3) else (m.group(2), None)
            funcs.append((words[0], kinds, lineno))
    return funcs, uses, names


def classify(p, fname, enums, handles):
    if p["depth"] == 0:
        b = p["base"]
        if b in enums:
            return "enum"
        if b in handles:
            return "ptr"
        if b in SIGNED:
            return "sint"
        if b in UNSIGNED:
            return "uint"
        if b in FLOATING:
            return "float"
        raise GenError("%s: argument %s has type '%s' the generator does not know"
                       % (fname, p["name"], b))
    return "pointer"


def gen_function(fname, kinds, lineno, protos, enums, handles):
    if fname not in protos:
        raise GenError("spec line %d: %s is not declared in the headers" % (lineno, fname))
    ret, args = protos[fname]
    if ret != "cudnnStatus_t":
        raise GenError("%s returns %s, not cudnnStatus_t: list it under 'uses'" % (fname, ret))
    params = [] if args in ("", "void") else [parse_param(a, fname) for a in args.split(",")]
    names = {p["name"] for p in params}
    for k in kinds:
        if k not in names:
            raise GenError("spec line %d: %s has no argument %s" % (lineno, fname, k))
    for p in params:
        p["cls"] = classify(p, fname, enums, handles)
        if p["cls"] == "pointer":
            if p["name"] not in kinds:
                raise GenError("spec line %d: pointer argument %s of %s needs a kind"
                               % (lineno, p["name"], fname))
            p["kind"], p["count"] = kinds[p["name"]]
            p["pointee"] = None
            if p["depth"] == 1 and p["base"] != "void":
                p["pointee"] = classify(dict(p, depth=0), fname, enums, handles)
            if p["count"] is not None:
                if p["count"] not in names:
                    raise GenError("spec line %d: %s: count %s is not an argument"
                                   % (lineno, fname, p["count"]))
                if p["depth"] != 1 or p["base"] not in ARRAY_ELEMS:
                    raise GenError("%s: %s cannot be traced as an array" % (fname, p["name"]))
        elif p["name"] in kinds:
            raise GenError("spec line %d: %s of %s is not a pointer" % (lineno, p["name"], fname))
    short = fname[len("cudnn"):] if fname.startswith("cudnn") else fname
    return {"name": fname, "short": short, "params": params}


def trace_lines(p, named):
    n, cls = p["name"], p["cls"]
    if cls == "enum" and p["base"] in named:
        return ["trace_enum(&t, \"%s\", (long long)%s, %s((int)%s));"
                % (n, n, name_fn(p["base"]), n)]
    if cls == "enum":
        return ["trace_int(&t, \"%s\", (long long)%s);" % (n, n)]
    if cls == "sint":
        return ["trace_int(&t, \"%s\", (long long)%s);" % (n, n)]
    if cls == "uint":
        return ["trace_uint(&t, \"%s\", (unsigned long long)%s);" % (n, n)]
    if cls == "float":
        return ["trace_float(&t, \"%s\", (double)%s);" % (n, n)]
    if cls == "ptr":
        return ["trace_ptr(&t, \"%s\", (const void *)%s);" % (n, n)]
    # pointers
    if p["count"] is not None:
        fn = "trace_ints" if ARRAY_ELEMS[p["base"]] == "int" else "trace_i64s"
        return ["%s(&t, \"%s\", %s, (long long)%s);" % (fn, n, n, p["count"])]
    if p["kind"] == "out" and p["depth"] == 1:
        if p["pointee"] in ("sint", "enum"):
            return ["trace_out_int(&t, \"%s\", %s, %s ? (long long)*%s : 0);" % (n, n, n, n)]
        if p["pointee"] == "uint":
            return ["trace_out_uint(&t, \"%s\", %s, %s ? (unsigned long long)*%s : 0);"
                    % (n, n, n, n)]
        if p["pointee"] == "ptr":
            return ["trace_out_ptr(&t, \"%s\", %s, %s ? (const void *)*%s : NULL);"
                    % (n, n, n, n)]
    if p["kind"] == "out" and p["depth"] == 2 and p["base"] == "void":
        return ["trace_out_ptr(&t, \"%s\", %s, %s ? (const void *)*%s : NULL);" % (n, n, n, n)]
    return ["trace_ptr(&t, \"%s\", (const void *)%s);" % (n, n)]


def emit_header(funcs, version, named, enums):
    v = version[0] * 10000 + version[1] * 100 + version[2]
    out = []
    w = out.append
    w("/* Generated by tools/gen_cudnn_bindings.py from tools/cudnn_spec.txt and the cuDNN %d.%d.%d"
      % version)
    w(" * headers. Do not edit: change the spec or the generator and regenerate. */")
    w("/* clang-format off */")
    w("#ifndef NN_CUDNN_BINDINGS_CUDNN_H")
    w("#define NN_CUDNN_BINDINGS_CUDNN_H")
    w("")
    w("#include \"core/cuda_load.h\" /* cudnn.h, its functions loaded at run time */")
    w("#include \"nnprim/status.h\"")
    w("")
    w("struct nn_ctx;")
    w("")
    w("/* CUDNN_VERSION of the headers this file was generated from. */")
    w("#define NN_CUDNN_BINDINGS_HEADER_VERSION %d" % v)
    w("")
    w("/* The nn_status for a failing cudnnStatus_t: NN_E_OOM_HOST / NN_E_OOM_DEVICE for cuDNN's")
    w(" * allocation failures, NN_E_UNSUPPORTED for the NOT_SUPPORTED category, else NN_E_CUDNN. */")
    w("nn_status nn__cudnn_status_to_nn(cudnnStatus_t st);")
    w("")
    w("/* Record a failed cuDNN call (function, status name, cudnnGetLastErrorString, call site) in")
    w(" * the thread's and ctx's last error (ctx may be NULL); returns the mapped status. */")
    w("nn_status nn__cudnn_fail(struct nn_ctx *ctx, cudnnStatus_t st, const char *call,")
    w("                         const char *file, int line);")
    out += emit_names(named, enums, True)
    for f in funcs:
        w("")
        decls = ", ".join(p["decl"] for p in f["params"])
        w("nn_status nn__cudnn_%s_at(struct nn_ctx *ctx, const char *file, int line%s);"
          % (f["short"], (", " + decls) if decls else ""))
        if f["params"]:
            w("#define nn__cudnn_%s(ctx, ...) nn__cudnn_%s_at((ctx), __FILE__, __LINE__, __VA_ARGS__)"
              % (f["short"], f["short"]))
        else:
            w("#define nn__cudnn_%s(ctx) nn__cudnn_%s_at((ctx), __FILE__, __LINE__)"
              % (f["short"], f["short"]))
    w("")
    w("#endif")
    return "\n".join(out) + "\n"


SUPPORT = r'''#include <stdarg.h>
#include <stdio.h>

#include "nn_config.h"

#include "core/error.h"
#include "core/log.h"
#include "cudnn/bindings_cudnn.h"

nn_status nn__cudnn_status_to_nn(cudnnStatus_t st)
{
    if (st == CUDNN_STATUS_SUCCESS) return NN_OK;
    if (st == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED) return NN_E_OOM_HOST;
    if (st == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED) return NN_E_OOM_DEVICE;
    if (CUDNN_STATUS_CATEGORY(st) == CUDNN_STATUS_NOT_SUPPORTED) return NN_E_UNSUPPORTED;
    return NN_E_CUDNN;
}

nn_status nn__cudnn_fail(struct nn_ctx *ctx, cudnnStatus_t st, const char *call, const char *file,
                         int line)
{
    char detail[NN_ERROR_MESSAGE_MAX];
    detail[0] = '\0';
    cudnnGetLastErrorString(detail, sizeof detail);
    const char *name = cudnnGetErrorString(st);
    return nn__record_error(ctx, nn__cudnn_status_to_nn(st), call, (int)st, name, file, line,
                            "%s failed: %s (%d)%s%s", call, name, (int)st, detail[0] ? ": " : "",
                            detail);
}

#if NN_DEBUG_CHECKS
/* A device-pointer argument must be device (or managed) memory; NULL is left to cuDNN. */
static nn_status check_dev(struct nn_ctx *ctx, const char *call, const char *arg, const void *p,
                           const char *file, int line)
{
    if (!p) return NN_OK;
    struct cudaPointerAttributes a;
    cudaError_t err = cudaPointerGetAttributes(&a, p);
    if (err != cudaSuccess) {
        cudaGetLastError();
        return nn__record_error(ctx, NN_E_MEMSPACE, call, (int)err, cudaGetErrorName(err), file,
                                line, "%s: argument %s = %p: cudaPointerGetAttributes failed: %s",
                                call, arg, p, cudaGetErrorString(err));
    }
    if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
        return nn__record_error(ctx, NN_E_MEMSPACE, call, 0, NULL, file, line,
                                "%s: argument %s = %p must be device memory, but its memory type "
                                "is %d (cudaMemoryType)",
                                call, arg, p, (int)a.type);
    return NN_OK;
}
#endif

/* One trace line: nnprim_trace,<function>(<name>=<value>, ...) -> <status> <ms> ms */
struct trace {
    char buf[2048];
    size_t n;
    int args;
};

__attribute__((format(printf, 2, 3))) static void trace_add(struct trace *t, const char *fmt, ...)
{
    if (t->n >= sizeof t->buf) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(t->buf + t->n, sizeof t->buf - t->n, fmt, ap);
    va_end(ap);
    if (k > 0) t->n += (size_t)k;
    if (t->n > sizeof t->buf) t->n = sizeof t->buf;
}

static void trace_name(struct trace *t, const char *name)
{
    trace_add(t, "%s%s=", t->args++ ? ", " : "", name);
}

static void trace_begin(struct trace *t, const char *call)
{
    t->n = 0;
    t->args = 0;
    trace_add(t, "nnprim_trace,%s(", call);
}

static void trace_int(struct trace *t, const char *name, long long v)
{
    trace_name(t, name);
    trace_add(t, "%lld", v);
}

static void trace_enum(struct trace *t, const char *name, long long v, const char *vname)
{
    trace_name(t, name);
    if (vname) trace_add(t, "%s", vname);
    else trace_add(t, "%lld", v);
}

static void trace_uint(struct trace *t, const char *name, unsigned long long v)
{
    trace_name(t, name);
    trace_add(t, "%llu", v);
}

static void trace_float(struct trace *t, const char *name, double v)
{
    trace_name(t, name);
    trace_add(t, "%g", v);
}

static void trace_ptr(struct trace *t, const char *name, const void *p)
{
    trace_name(t, name);
    trace_add(t, "%p", p);
}

#define TRACE_ARRAY_MAX 16

static void trace_ints(struct trace *t, const char *name, const int *a, long long n)
{
    trace_name(t, name);
    if (!a || n < 0) {
        trace_add(t, "%p", (const void *)a);
        return;
    }
    trace_add(t, "{");
    for (long long i = 0; i < n && i < TRACE_ARRAY_MAX; i++) trace_add(t, i ? ",%d" : "%d", a[i]);
    trace_add(t, n > TRACE_ARRAY_MAX ? ",...}" : "}");
}

static void trace_out_int(struct trace *t, const char *name, const void *p, long long v)
{
    trace_name(t, name);
    if (p) trace_add(t, "%p->%lld", p, v);
    else trace_add(t, "(nil)");
}

static void trace_out_uint(struct trace *t, const char *name, const void *p, unsigned long long v)
{
    trace_name(t, name);
    if (p) trace_add(t, "%p->%llu", p, v);
    else trace_add(t, "(nil)");
}

static void trace_out_ptr(struct trace *t, const char *name, const void *p, const void *v)
{
    trace_name(t, name);
    if (p) trace_add(t, "%p->%p", p, v);
    else trace_add(t, "(nil)");
}

static void trace_end(struct trace *t, cudnnStatus_t st, uint64_t start_ns)
{
    double ms = (double)(nn__now_ns() - start_ns) / 1e6;
    trace_add(t, ") -> %s %.4f ms", cudnnGetErrorString(st), ms);
    nn__log_line(NN_LOG_TRACE, t->buf); /* vsnprintf kept it NUL-terminated */
}
'''


def emit_names(named, enums, header):
    out = []
    for tname in named:
        if header:
            out.append("")
            out.append("/* The enumerator's name of a %s value, or NULL for a value the headers do"
                       % tname)
            out.append(" * not name. */")
            out.append("const char *%s(int v);" % name_fn(tname))
            continue
        out.append("")
        out.append("const char *%s(int v)" % name_fn(tname))
        out.append("{")
        out.append("    switch (v) {")
        for name, value in enum_values(tname, enums[tname]):
            out.append("    case %d: return \"%s\";" % (value, name))
        out.append("    default: return NULL;")
        out.append("    }")
        out.append("}")
    return out


def emit_source(funcs, version, need_i64, named, enums):
    out = []
    w = out.append
    w("/* Generated by tools/gen_cudnn_bindings.py from tools/cudnn_spec.txt and the cuDNN %d.%d.%d"
      % version)
    w(" * headers. Do not edit: change the spec or the generator and regenerate. */")
    w("/* clang-format off */")
    support = SUPPORT
    if need_i64:
        support += r'''
static void trace_i64s(struct trace *t, const char *name, const int64_t *a, long long n)
{
    trace_name(t, name);
    if (!a || n < 0) {
        trace_add(t, "%p", (const void *)a);
        return;
    }
    trace_add(t, "{");
    for (long long i = 0; i < n && i < TRACE_ARRAY_MAX; i++)
        trace_add(t, i ? ",%lld" : "%lld", (long long)a[i]);
    trace_add(t, n > TRACE_ARRAY_MAX ? ",...}" : "}");
}
'''
    w(support.rstrip("\n"))
    out += emit_names(named, enums, False)
    for f in funcs:
        params = f["params"]
        decls = ", ".join(p["decl"] for p in params)
        w("")
        w("nn_status nn__cudnn_%s_at(struct nn_ctx *ctx, const char *file, int line%s)"
          % (f["short"], (", " + decls) if decls else ""))
        w("{")
        devs = [p for p in params if p["cls"] == "pointer" and p["kind"] == "dev"]
        if devs:
            w("#if NN_DEBUG_CHECKS")
            for p in devs:
                w("    NN__TRY(check_dev(ctx, \"%s\", \"%s\", (const void *)%s, file, line));"
                  % (f["name"], p["name"], p["name"]))
            w("#endif")
        w("    int traced = nn__verbose(ctx) >= 2;")
        w("    uint64_t start = traced ? nn__now_ns() : 0;")
        w("    cudnnStatus_t st = %s(%s);" % (f["name"], ", ".join(p["name"] for p in params)))
        w("    if (traced) {")
        w("        struct trace t;")
        w("        trace_begin(&t, \"%s\");" % f["name"])
        for p in params:
            for line in trace_lines(p, named):
                w("        " + line)
        w("        trace_end(&t, st, start);")
        w("    }")
        w("    if (st != CUDNN_STATUS_SUCCESS) return nn__cudnn_fail(ctx, st, \"%s\", file, line);"
          % f["name"])
        w("    return NN_OK;")
        w("}")
    return "\n".join(out) + "\n"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--include", required=True, help="directory holding the cuDNN 9 headers")
    ap.add_argument("--spec", default=os.path.join(here, "cudnn_spec.txt"))
    ap.add_argument("--out", required=True, help="directory for bindings_cudnn.h and .c")
    a = ap.parse_args(argv)
    try:
        version, protos, enums, handles = parse_headers(a.include)
        spec, uses, names = parse_spec(a.spec)
        named = []
        for tname, lineno in names:
            if tname not in enums:
                raise GenError("spec line %d: %s is not an enum of the headers" % (lineno, tname))
            named.append(tname)
        for name, ret, lineno in uses:
            if name not in protos:
                raise GenError("spec line %d: %s is not declared in the headers" % (lineno, name))
            if protos[name][0] != ret:
                raise GenError("spec line %d: %s returns '%s', the spec expects '%s'"
                               % (lineno, name, protos[name][0], ret))
        funcs = [gen_function(n, k, l, protos, enums, handles) for n, k, l in spec]
        need_i64 = any(p["cls"] == "pointer" and p["count"] is not None
                       and ARRAY_ELEMS[p["base"]] == "i64" for f in funcs for p in f["params"])
        os.makedirs(a.out, exist_ok=True)
        for fname, text in (("bindings_cudnn.h", emit_header(funcs, version, named, enums)),
                            ("bindings_cudnn.c", emit_source(funcs, version, need_i64, named, enums))):
            with open(os.path.join(a.out, fname), "w", encoding="utf-8", newline="\n") as f:
                f.write(text)
    except GenError as e:
        print("gen_cudnn_bindings.py: error: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
