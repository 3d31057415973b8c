#ifndef NN_CORE_SETTINGS_H
#define NN_CORE_SETTINGS_H

#include "nnprim/context.h"

/* Check every field's range (and that the reserved fields are zero) for nn_ctx_create(); the
 * message names nn_ctx_create, the field and what it accepts. */
nn_status nn__settings_check(const nn_settings *s);

/* Names for messages and the CLI. */
const char *nn__backend_name(nn_backend b);
const char *nn__math_name(nn_math_mode m);
const char *nn__tuning_name(nn_tuning_mode t);

#endif
