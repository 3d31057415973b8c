/* Many threads, each with several contexts, running every op family at once: the
 * results must be those of the same work done on one thread, each thread's provoked failures
 * must come back in its own last-error record and its contexts', and nothing may crash or race.
 * The scenarios live in threads_scenarios.c, which tsan_threads.c also runs under
 * ThreadSanitizer (tools/tsan.sh; docs/MULTI_GPU.md). The reference backend runs on every
 * machine; the GPU tests put the threads on every visible device. */
#include <criterion/criterion.h>

#include "gpu.h"
#include "nnprim/nnprim.h"
#include "threads_scenarios.h"

Test(threads, reference_backend)
{
    char fail[2048];
    cr_expect_eq(ts_stress(NN_BACKEND_REF, 1, 0, fail, sizeof fail), 0, "%s", fail);
}

/* One device per thread in turn (threads share devices when there are fewer than TS_THREADS):
 * every device's pool, plan caches and background builders at once. */
Test(threads, every_gpu)
{
    NN_REQUIRE_GPU();
    int n = 0;
    cr_assert_eq(nn_device_count(&n), NN_OK);
    char fail[2048];
    cr_expect_eq(ts_stress(NN_BACKEND_CUDNN, n, 1e-5, fail, sizeof fail), 0, "%s", fail);
}

/* Contexts of two devices in one thread, alternating. */
Test(threads, two_gpus_one_thread)
{
    NN_REQUIRE_GPU();
    int n = 0;
    cr_assert_eq(nn_device_count(&n), NN_OK);
    if (n < 2) cr_skip_test("needs two GPUs: %d visible", n);
    char fail[2048];
    cr_expect_eq(ts_two_devices_one_thread(fail, sizeof fail), 0, "%s", fail);
}
