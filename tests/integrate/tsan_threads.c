/* The thread scenarios of test_threads.c as a plain program, for ThreadSanitizer (tools/tsan.sh):
 * Criterion's runner crashes under TSan before any test. The reference backend always; cuDNN on
 * every visible GPU when there is one, and the two-device scenario with two. Prints one line per
 * scenario ("ok", "FAIL ..." or "skip: <reason>"); exit status 0 when none failed. */
#include <stdio.h>

#include "gpu.h"
#include "nnprim/nnprim.h"
#include "threads_scenarios.h"

static int report(const char *name, int bad, const char *fail)
{
    printf("%s %s%s%s\n", bad ? "FAIL" : "ok  ", name, bad ? ": " : "", bad ? fail : "");
    return bad;
}

int main(void)
{
    char fail[2048] = "";
    int bad = report("threads reference_backend",
                     ts_stress(NN_BACKEND_REF, 1, 0, fail, sizeof fail), fail);
    const char *why;
    int n = 0;
    if (!nn_test_have_gpu(&why)) {
        printf("skip threads every_gpu: needs a GPU: %s\n", why);
    } else {
        nn_device_count(&n);
        bad |= report("threads every_gpu", ts_stress(NN_BACKEND_CUDNN, n, 1e-5, fail, sizeof fail),
                      fail);
    }
    if (n < 2)
        printf("skip threads two_gpus_one_thread: needs two GPUs: %d visible\n", n);
    else
        bad |= report("threads two_gpus_one_thread", ts_two_devices_one_thread(fail, sizeof fail),
                      fail);
    return bad;
}
