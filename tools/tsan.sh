#!/bin/sh
# The thread scenarios (tests/integrate/threads_scenarios.c) under ThreadSanitizer, through the
# plain driver tsan_threads (Criterion's runner cannot start under TSan). Builds only that
# program and the library, with plain malloc (jemalloc's arenas are not TSan-instrumented), and
# prints TSan's verdict last: "tsan: N reports" (exit 1 if N > 0 or a scenario failed).
#   tools/tsan.sh [BUILD_DIR]        (default build-tsan; extra meson setup args in TSAN_MESON)
# On the CPU machine it runs the reference backend; with a GPU it adds cuDNN on every device
# (CUDA and cuDNN are not instrumented: a report inside them names their frames).
set -u
cd "$(dirname "$0")/.." || exit 2
build=${1:-build-tsan}
if [ ! -f "$build/build.ninja" ]; then
  # shellcheck disable=SC2086 # TSAN_MESON holds words
  meson setup "$build" -Db_sanitize=thread -Db_lundef=false -Djemalloc=disabled -Dbench=false \
    ${TSAN_MESON:-} || { echo "tsan: setup failed"; exit 2; }
fi
ninja -C "$build" tests/integrate/tsan_threads || { echo "tsan: build failed"; exit 2; }
log="$build/tsan_threads.log"
# halt_on_error=0: every race is reported, not only the first; exitcode 0 so the count decides.
TSAN_OPTIONS="halt_on_error=0 exitcode=0 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" \
  "$build/tests/integrate/tsan_threads" > "$log" 2>&1
rc=$?
cat "$log"
reports=$(grep -c "WARNING: ThreadSanitizer" "$log")
echo "tsan: $reports reports, driver exit $rc (log: $log)"
[ "$reports" -eq 0 ] && [ "$rc" -eq 0 ]
