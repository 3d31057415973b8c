/* The reference-backend context the fuzz targets run the library on: made at the first call (the
 * environment not read), kept for the process. Aborts when it cannot be made: the target is then
 * broken, not the input. */
#ifndef NN_FUZZ_REF_CTX_H
#define NN_FUZZ_REF_CTX_H

#include "nnprim/nnprim.h"

nn_ctx *nn_fuzz_ref_ctx(void);

#endif
