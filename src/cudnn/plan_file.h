/* The plan file (plan_file.c): the records of a cache (cache.h), of every kind, with the identity
 * of the process that wrote them. The cuDNN version and GPU identity are parameters, so tests can
 * fake them; handle_cudnn.c passes cudnnGetVersion() and the context's device. */
#ifndef NN_CUDNN_PLAN_FILE_H
#define NN_CUDNN_PLAN_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "cudnn/cache.h"
#include "nnprim/status.h"

struct nn_ctx;

#define NN__GPU_NAME_MAX 256 /* bytes including the NUL */

struct nn__gpu_id {
    char name[NN__GPU_NAME_MAX]; /* NUL-terminated */
    int32_t cc_major, cc_minor;
    int32_t sm_count;
};

/* Serialize every record nn__cache_visit() yields (format version 3; so none of a kind
 * NN__CACHE_KIND_NOT_PERSISTED) into a new buffer (nn__host_free it).
 * Returns NN_OK; NN_E_OOM_HOST; NN_E_OVERFLOW (more than the format holds). */
nn_status nn__plan_file_encode(struct nn_ctx *ctx, const struct nn__cache *c,
                               uint64_t cudnn_version, const struct nn__gpu_id *gpu,
                               unsigned char **out, size_t *out_len);

/* Parse a whole file image (format version 3; any other version is NN_E_FORMAT, the message naming
 * the file's version and this build's). If it is well formed, its records are added to c's known
 * records. Records of another cuDNN version or GPU, of a kind c does not have, and of a kind of
 * c's that is NN__CACHE_KIND_NOT_PERSISTED are skipped and counted, not added.
 * Otherwise nothing is added and NN_E_FORMAT names the field and its byte offset. what names the
 * source in messages (the path). Returns NN_OK; NN_E_FORMAT; NN_E_OOM_HOST (nothing added). */
nn_status nn__plan_file_decode(struct nn_ctx *ctx, struct nn__cache *c, const char *what,
                               const unsigned char *buf, size_t len, uint64_t cudnn_version,
                               const struct nn__gpu_id *gpu);

/* Merge the cache into the file at path: under an exclusive flock() of path.lock (created beside
 * it, and left there), the records of c, then those of c's device's shared tuning, then those of
 * the file already at path that neither has (ours win on equal keys; records of another cuDNN
 * version or GPU in it are dropped), are written to a temporary file in the same directory
 * (mkstemp), synced and renamed over path. Concurrent savers (threads or processes) therefore
 * keep each other's records. An existing file that does not decode is left as it is.
 * Returns NN_OK; NN_E_IO (path and strerror in the message); NN_E_FORMAT (the file at path is no
 * valid plan file: the decoder's message); NN_E_OOM_HOST; NN_E_OVERFLOW. */
nn_status nn__plan_file_save(struct nn_ctx *ctx, const struct nn__cache *c, const char *path,
                             uint64_t cudnn_version, const struct nn__gpu_id *gpu);

/* Read path and nn__plan_file_decode() it. Returns NN_OK; NN_E_IO (missing or unreadable file:
 * path and strerror); NN_E_FORMAT; NN_E_OOM_HOST. On failure nothing is added. */
nn_status nn__plan_file_load(struct nn_ctx *ctx, struct nn__cache *c, const char *path,
                             uint64_t cudnn_version, const struct nn__gpu_id *gpu);

#endif
