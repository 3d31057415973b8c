#ifndef NN_CORE_SETTINGS_H
#define NN_CORE_SETTINGS_H

#include "nnprim/context.h"

/* Check every field's range (and that the reserved fields are zero) for nn_ctx_create(); the
 * message names nn_ctx_create, the field and what it accepts. */
nn_status nn__settings_check(const nn_settings *s);

#endif
