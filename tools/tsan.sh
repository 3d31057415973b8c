#!/bin/sh
# The thread scenarios and the memory pool under contention, under ThreadSanitizer, through two
# plain drivers (Criterion's runner cannot start under TSan):
#   tsan_threads  the scenarios of tests/integrate/threads_scenarios.c (threads x contexts x ops)
#   mem_stress    the host pool, which runs the device pool's bookkeeping (src/mem/mem_pool.c)
#                 over simulated streams: 8 threads allocating and freeing across streams, then
#                 the pool under contention (work pending, trims, statistics and the event log
#                 read by another thread) (tests/mem/stress.c)
# Builds only those programs and the library, with plain malloc (jemalloc's arenas are not
# TSan-instrumented), and prints TSan's verdict last: "tsan: N reports" (exit 1 if N > 0 or a
# driver failed).
#   tools/tsan.sh [BUILD_DIR]        (default build-tsan; extra meson setup args in TSAN_MESON)
# On the CPU machine tsan_threads runs the reference backend; with a GPU it adds cuDNN on every
# device (CUDA and cuDNN are not instrumented: a report inside them names their frames).
set -u
cd "$(dirname "$0")/.." || exit 2
build=${1:-build-tsan}
if [ ! -f "$build/build.ninja" ]; then
  # shellcheck disable=SC2086 # TSAN_MESON holds words
  meson setup "$build" -Db_sanitize=thread -Db_lundef=false -Djemalloc=disabled -Dbench=false \
    ${TSAN_MESON:-} || { echo "tsan: setup failed"; exit 2; }
fi
ninja -C "$build" tests/integrate/tsan_threads tests/mem/mem_stress ||
  { echo "tsan: build failed"; exit 2; }
log="$build/tsan.log"
: > "$log"
failed=0
for prog in tests/integrate/tsan_threads tests/mem/mem_stress; do
  echo "== $prog" >> "$log"
  # halt_on_error=0: every race is reported, not only the first; exitcode 0 so the count decides.
  TSAN_OPTIONS="halt_on_error=0 exitcode=0 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" \
    "$build/$prog" >> "$log" 2>&1 || { failed=$((failed + 1)); echo "FAIL $prog" >> "$log"; }
done
cat "$log"
reports=$(grep -c "WARNING: ThreadSanitizer" "$log")
echo "tsan: $reports reports, $failed driver(s) failed (log: $log)"
[ "$reports" -eq 0 ] && [ "$failed" -eq 0 ]
