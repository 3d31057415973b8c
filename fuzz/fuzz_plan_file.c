/* libFuzzer target for the plan-file decoder (fuzz/plan_file/meson.build; tools/fuzz.sh runs it).
 *
 * Any input must be accepted or rejected with NN_E_FORMAT, never crash or leak. An accepted
 * image must survive a round trip: encoding the loaded records and decoding them again gives the
 * same records. The identity is the one the seeds are written with, so their records are taken
 * (and hashed, compared, copied) rather than skipped.
 *
 * Nearly every mutation breaks the trailing checksum, so each input is also decoded a second time
 * with its checksum recomputed: that reaches the accepting paths (record insertion, the round
 * trip) with mutated contents, without a fuzzing-only branch in the decoder. */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "conv/conv_plan_key.h"
#include "cudnn/plan_cache.h"
#include "cudnn/plan_file.h"
#include "plan_fixtures.h" /* the identity the corpus test replays with */

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

struct check {
    struct nn__cache *other;
};

static int same_in_other(void *arg, const void *k, const struct nn__plan_record *r)
{
    struct check *c = arg;
    const struct nn__plan_record *o = nn__plan_cache_lookup_known(c->other, NN__CONV_KIND_ID, k);
    if (!o || !fx_record_equal(o, r)) abort();
    return 0;
}

static void decode_and_check(const unsigned char *data, size_t size)
{
    struct nn__gpu_id gpu = fx_gpu();
    struct nn__cache *c = NULL;
    if (fx_cache_create(NULL, 4, &c) != NN_OK) abort();
    nn_status st = nn__plan_file_decode(NULL, c, "fuzz", data, size, FX_CUDNN_VERSION, &gpu);
    if (st != NN_OK && st != NN_E_FORMAT) abort();
    if (st == NN_E_FORMAT && nn__cache_known_count(c) != 0) abort();
    if (st == NN_OK) {
        unsigned char *buf;
        size_t len;
        if (nn__plan_file_encode(NULL, c, FX_CUDNN_VERSION, &gpu, &buf, &len) != NN_OK) abort();
        struct check chk = {NULL};
        if (fx_cache_create(NULL, 4, &chk.other) != NN_OK) abort();
        if (nn__plan_file_decode(NULL, chk.other, "re-encoded", buf, len, FX_CUDNN_VERSION, &gpu) !=
            NN_OK)
            abort();
        if (nn__cache_known_count(chk.other) != nn__cache_known_count(c)) abort();
        nn__plan_cache_visit(c, NN__CONV_KIND_ID, same_in_other, &chk);
        nn__cache_destroy(chk.other);
        nn__host_free(buf);
    }
    nn__cache_destroy(c);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    decode_and_check(data, size);
    if (size < 8) return 0;
    unsigned char *sealed = malloc(size);
    if (!sealed) abort();
    memcpy(sealed, data, size);
    uint64_t h = 0xcbf29ce484222325u; /* FNV-1a 64, as the file format specifies */
    for (size_t i = 0; i < size - 8; i++)
        h = (h ^ sealed[i]) * 0x100000001b3u;
    for (int i = 0; i < 8; i++)
        sealed[size - 8 + (size_t)i] = (unsigned char)(h >> (8 * i));
    decode_and_check(sealed, size);
    free(sealed);
    return 0;
}
