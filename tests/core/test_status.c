#include <criterion/criterion.h>
#include <string.h>

#include "core/error.h"
#include "nnprim/nnprim.h"

Test(status, names_and_texts_come_from_one_list)
{
#define CHECK(name, value, text)                                                                   \
    cr_expect_str_eq(nn_status_name(name), #name);                                                 \
    cr_expect_str_eq(nn_status_string(name), text);                                                \
    cr_expect(value <= 0);
    NN_STATUS_LIST(CHECK)
#undef CHECK
    cr_expect_str_eq(nn_status_name((nn_status)-9999), "NN_UNKNOWN");
    cr_expect_str_eq(nn_status_string((nn_status)42), "unknown status");
}

Test(status, failing_call_records_thread_error)
{
    nn_clear_last_error();
    cr_assert_eq(nn_last_error()->status, NN_OK);
    cr_assert_eq(nn_settings_from_env(NULL), NN_E_INVALID_ARG);
    const nn_error_info *e = nn_last_error();
    cr_expect_eq(e->status, NN_E_INVALID_ARG);
    cr_expect(strstr(e->message, "s must not be NULL"), "message: %s", e->message);
    cr_expect_str_eq(e->file, "settings.c");
    cr_expect_gt(e->line, 0);
}

/* A backend serves several public functions: its failure is named after the one called. */
Test(status, backend_failures_are_named_after_the_public_function)
{
    nn_status st = NN__FAIL(NULL, NN_E_OOM_HOST, "conv_backward_data (ref): out of host memory");
    cr_assert_eq(nn__error_in(NULL, "nn_conv_backward"), st);
    cr_expect_str_eq(nn_last_error()->message,
                     "nn_conv_backward: conv_backward_data (ref): out of host memory");
    NN__FAIL(NULL, NN_E_SHAPE, "nn_conv_backward: dy.dims[1] must be 4, got 3");
    cr_assert_eq(nn__error_in(NULL, "nn_conv_backward"), NN_E_SHAPE);
    cr_expect_str_eq(nn_last_error()->message, "nn_conv_backward: dy.dims[1] must be 4, got 3");
}
