#include <criterion/criterion.h>

#include "core/alloc.h"
#include "oom.h"

long nn_test_every_host_alloc_failure(nn_test_op op, void *arg, const char *what)
{
    /* One clean run first: process-wide tables that grow once (and stay) are not leaks. */
    cr_assert_eq(op(arg), NN_OK, "%s failed with no allocation failing", what);
    for (long n = 1;; n++) {
        long live = nn__host_alloc_live();
        nn__host_alloc_fail_at(n);
        nn_status st = op(arg);
        long made = nn__host_alloc_fail_at(0);
        cr_assert_eq(nn__host_alloc_live(), live,
                     "%s: %ld host block(s) leaked with allocation %ld "
                     "failing",
                     what, nn__host_alloc_live() - live, n);
        if (made < n) {
            cr_assert_eq(st, NN_OK, "%s failed (%s) with no allocation failing", what,
                         nn_status_name(st));
            return made;
        }
        cr_assert_eq(st, NN_E_OOM_HOST, "%s with allocation %ld of %ld failing returned %s", what,
                     n, made, nn_status_name(st));
    }
}
