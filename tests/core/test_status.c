#include <criterion/criterion.h>
#include <string.h>

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
    cr_assert_eq(nn_default_settings(NULL), NN_E_INVALID_ARG);
    const nn_error_info *e = nn_last_error();
    cr_expect_eq(e->status, NN_E_INVALID_ARG);
    cr_expect(strstr(e->message, "s must not be NULL"), "message: %s", e->message);
    cr_expect_str_eq(e->file, "settings.c");
    cr_expect_gt(e->line, 0);
}
