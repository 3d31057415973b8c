#!/bin/sh
# Builds (if needed) and runs every test suite, then prints the skipped tests with their reasons
# and, as the last line, the total: "N passed, M failed, K skipped".
#   tools/test.sh [BUILD_DIR [MESON_SETUP_ARGS...]]     (default BUILD_DIR: build)
# NNPRIM_TEST_JOBS: suites run at once (default 2, what CI has).
# The arguments configure a new build directory, or reconfigure an existing one (CI passes
# -Dwerror=true, which is not a default).
# Criterion writes each suite's counts as JSON under BUILD_DIR/tests/results/; a test program
# without them (not Criterion, or dead before writing) counts by meson's verdict, as one test.
set -u
cd "$(dirname "$0")/.."
build=${1:-build}
[ $# -gt 0 ] && shift
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$@" || { echo "0 passed, 1 failed"; exit 1; }
elif [ $# -gt 0 ]; then
  meson configure "$build" "$@" || { echo "0 passed, 1 failed"; exit 1; }
fi
ninja -C "$build" || { echo "0 passed, 1 failed"; exit 1; }
results="$build/tests/results"
mkdir -p "$results"
rm -f "$results"/*.json
meson test -C "$build" --print-errorlogs --num-processes "${NNPRIM_TEST_JOBS:-2}"
rc=$?
python3 - "$results" "$build/meson-logs/testlog.json" <<'PY'
import json, os, re, sys
results, testlog = sys.argv[1], sys.argv[2]
passed = failed = skipped = 0
skips = []
with open(testlog) as f:
    runs = [json.loads(line) for line in f if line.strip()]
for run in runs:
    name, result = run["name"], run["result"]
    # Meson may name a test "project:suite / name" or "project / name" (1.0 does so once a test
    # has a suite); the JSON file carries the test's own name.
    path = os.path.join(results, name.split(" / ")[-1].split(":")[-1] + ".json")
    if not os.path.exists(path):
        # Not a Criterion suite (or it died before writing its counts): meson's verdict counts.
        if result == "OK":
            passed += 1
        elif result == "SKIP":
            skipped += 1
            # Its reason: the last line it printed (exit status 77 is meson's skip).
            why = (run.get("stdout") or "").strip().splitlines()
            skips.append(f"{name}: {why[-1] if why else 'skipped by meson'}")
        else:
            print(f"test {name}: {result} without Criterion results: counted as 1 failure")
            failed += 1
        continue
    with open(path) as f:
        text = f.read()
    try:
        r = json.loads(text)
    except ValueError:
        # Criterion does not escape quotes inside assertion messages, which makes its JSON
        # invalid: the suite's totals come first in the file and are read off the text instead.
        r = {"test_suites": []}
        for key in ("passed", "failed", "errored", "skipped"):
            m = re.search(r'"%s"\s*:\s*(\d+)' % key, text)
            r[key] = int(m.group(1)) if m else 0
        print(f"suite {name}: its Criterion JSON is malformed; totals read from the text")
    passed += r["passed"]
    failed += r["failed"] + r["errored"]
    skipped += r["skipped"]
    if result not in ("OK", "SKIP") and r["failed"] + r["errored"] == 0:
        print(f"suite {name}: {result} although its tests passed: counted as 1 failure")
        failed += 1
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
