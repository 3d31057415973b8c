#!/usr/bin/env python3
"""Per shape, the median across runs of each ratio column of `nnprim bench rnn` against raw cuDNN
(x_fwd ... x_host, the control's c_fwd ... c_stp, x_wraw, x_weag), with the lowest and highest
reading, as Markdown.

Why: on the H200 a pass of the same cuDNN calls lands on one of two levels about 4.5% apart, which
level a side gets changes from process to process, and `--control` shows it between two raw cuDNN
sides (docs/PERFORMANCE.md, "Reading a per-pass ratio"). One process cannot tell a 2% difference on such a pass;
the median over several processes can. Each run is a separate `nnprim bench rnn` process's output
(a log with other lines in it is fine: a table is its header line, the one with x_fwd in it, and
the rows after it); a shape missing from a run is left out of that run's figures.

usage: python3 bench/summarize_rnn.py RUN1.txt RUN2.txt [...] [--over 1.02]
  --over X: also list every (shape, column) whose median is above X.
"""
import argparse
import statistics
import sys

MODES = ("replay", "eager", "undecided", "-")


def rows(path):
    """{shape: {column: value}} of the ratio columns of every table in path."""
    out, header = {}, None
    for line in open(path):
        parts = line.split()
        if "x_fwd" in parts and parts[-1] == "shape":
            header = parts[:-2]  # the numeric columns; then mode and shape
            continue
        if header is None or len(parts) < len(header) + 2 or parts[len(header)] not in MODES:
            continue
        shape = " ".join(parts[len(header) + 1:])
        vals = {}
        for name, text in zip(header, parts):
            if name.startswith(("x_", "c_")) and name != "x_first":  # x_first: not against raw
                try:
                    vals[name] = float(text)
                except ValueError:
                    pass  # "-" or "error"
        vals["mode"] = parts[len(header)]
        out[shape] = vals
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 usage="%(prog)s RUN1.txt RUN2.txt [...] [--over X]")
    ap.add_argument("runs", nargs="+", metavar="RUN", help="a `nnprim bench rnn` log")
    ap.add_argument("--over", type=float, metavar="X",
                    help="also list every (shape, column) whose median is above X")
    a = ap.parse_args(argv)
    over, paths = a.over, a.runs
    runs = [rows(p) for p in paths]
    shapes = list(dict.fromkeys(s for r in runs for s in r))
    cols = list(dict.fromkeys(c for r in runs for v in r.values() for c in v if c != "mode"))
    if not cols:
        sys.exit("no ratio columns in these runs (a reference-backend run has none)")
    print(f"Median over {len(paths)} runs (lowest-highest), per shape and column:\n")
    print("| shape | mode | " + " | ".join(cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    above = []
    for s in shapes:
        modes = "/".join(dict.fromkeys(r[s]["mode"] for r in runs if s in r))
        cells = []
        for c in cols:
            v = [r[s][c] for r in runs if s in r and c in r[s]]
            if not v:
                cells.append("-")
                continue
            m = statistics.median(v)
            cells.append(f"{m:.2f} ({min(v):.2f}-{max(v):.2f})" if len(v) > 1 else f"{m:.2f}")
            if over is not None and m > over:
                above.append((s, c, m))
        print(f"| {s} | {modes} | " + " | ".join(cells) + " |")
    if over is not None:
        print(f"\nMedians above {over}: {len(above)}")
        for s, c, m in above:
            print(f"- {s}: {c} {m:.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
