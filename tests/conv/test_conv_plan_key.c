/* The one table of which tensor (uid) fills which slot of conv's plan-cache key by pass
 * (src/conv/conv_plan_key.h), and its inverse: the values plan files and JSON plans hold. */
#include <criterion/criterion.h>

#include "conv/conv_plan_key.h"

Test(conv_plan_key, the_slots_of_each_pass)
{
    static const int want[4][NN__CONV_SLOTS] = {
        {0},
        {NN__CONV_UID_X, NN__CONV_UID_W, NN__CONV_UID_Y, NN__CONV_UID_B},
        {NN__CONV_UID_DX, NN__CONV_UID_W, NN__CONV_UID_DY, 0},
        {NN__CONV_UID_X, NN__CONV_UID_DW, NN__CONV_UID_DY, 0},
    };
    for (int pass = NN__CONV_PASS_FWD; pass <= NN__CONV_PASS_BWD_FILTER; pass++)
        for (int i = 0; i < NN__CONV_SLOTS; i++)
            cr_expect_eq(nn__conv_uid_of_slot(pass, i), want[pass][i], "pass %d slot %d: %d", pass,
                         i, nn__conv_uid_of_slot(pass, i));
}

Test(conv_plan_key, slot_of_uid_inverts_it)
{
    for (int pass = NN__CONV_PASS_FWD; pass <= NN__CONV_PASS_BWD_FILTER; pass++) {
        int found = 0;
        for (int u = 0; u <= NN__CONV_UID_END; u++) {
            int s = nn__conv_slot_of_uid(pass, u);
            if (s < 0) continue;
            found++;
            cr_expect_eq(nn__conv_uid_of_slot(pass, s), u, "pass %d uid %d: slot %d", pass, u, s);
        }
        cr_expect_eq(found, pass == NN__CONV_PASS_FWD ? 4 : 3, "pass %d: %d tensors", pass, found);
    }
}

Test(conv_plan_key, values_that_are_no_pass_or_slot_have_none)
{
    const int passes[] = {0, -1, NN__CONV_PASS_BWD_FILTER + 1};
    for (int i = 0; i < 3; i++) {
        cr_expect_eq(nn__conv_uid_of_slot(passes[i], NN__CONV_SLOT_IN), 0, "pass %d", passes[i]);
        cr_expect_eq(nn__conv_slot_of_uid(passes[i], NN__CONV_UID_X), -1, "pass %d", passes[i]);
    }
    cr_expect_eq(nn__conv_uid_of_slot(NN__CONV_PASS_FWD, -1), 0);
    cr_expect_eq(nn__conv_uid_of_slot(NN__CONV_PASS_FWD, NN__CONV_SLOTS), 0);
    cr_expect_eq(nn__conv_slot_of_uid(NN__CONV_PASS_FWD, 0), -1);
    cr_expect_eq(nn__conv_slot_of_uid(NN__CONV_PASS_FWD, NN__CONV_UID_DB), -1);
    cr_expect_eq(nn__conv_slot_of_uid(NN__CONV_PASS_BWD_DATA, NN__CONV_UID_B), -1);
}
