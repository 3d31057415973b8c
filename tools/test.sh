#!/bin/sh
# Builds (if needed) and runs every test suite, then prints the skipped tests with their reasons
# and, as the last line, the total: "N passed, M failed, K skipped".
#   tools/test.sh [BUILD_DIR [MESON_SETUP_ARGS...]]     (default BUILD_DIR: build)
# Criterion writes each suite's counts as JSON under BUILD_DIR/tests/results/; a suite that dies
# before writing them counts as one failure.
set -u
cd "$(dirname "$0")/.."
build=${1:-build}
[ $# -gt 0 ] && shift
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$@" || { echo "0 passed, 1 failed"; exit 1; }
fi
ninja -C "$build" || { echo "0 passed, 1 failed"; exit 1; }
results="$build/tests/results"
mkdir -p "$results"
rm -f "$results"/*.json
meson test -C "$build" --print-errorlogs --num-processes 2
rc=$?
suites=$(meson introspect "$build" --tests | python3 -c 'import json,sys; print(" ".join(t["name"] for t in json.load(sys.stdin)))')
python3 - "$results" $suites <<'PY'
import json, os, sys
results, suites = sys.argv[1], sys.argv[2:]
passed = failed = skipped = 0
skips = []
for s in suites:
    path = os.path.join(results, s + ".json")
    try:
        with open(path) as f:
            r = json.load(f)
    except (OSError, ValueError):
        print(f"suite {s}: no results (it crashed or did not run): counted as 1 failure")
        failed += 1
        continue
    passed += r["passed"]
    failed += r["failed"] + r["errored"]
    skipped += r["skipped"]
    for suite in r["test_suites"]:
        for t in suite["tests"]:
            if t["status"] == "SKIPPED":
                skips.append(f'{suite["name"]}::{t["name"]}: {"; ".join(t.get("messages", []))}')
if skips:
    print(f"skipped ({len(skips)}):")
    for line in sorted(skips):
        print("  " + line)
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
PY
py=$?
[ $rc -eq 0 ] && [ $py -eq 0 ]
