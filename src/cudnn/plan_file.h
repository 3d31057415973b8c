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

/* Parse a whole file image (format version 1, 2 or 3). If it is well formed, its records are added
 * to c's known records; records of a retired kind id that a kind of c takes over (its legacy hook,
 * cache.h), and version 1 and 2 records, are imported into that kind. Records of another cuDNN
 * version or GPU, of a kind c neither has nor imports, of a kind of c's that is
 * NN__CACHE_KIND_NOT_PERSISTED, and those whose key the import refuses are skipped and counted,
 * not added.
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

/* ---------------------------------------------------------------------------------------------
 * Reading a retired key layout (struct nn__cache_legacy.read_v2_key)
 */

/* The decoder's position in a file. Each call reads one little-endian field named field (for the
 * message) at the current position and advances; it returns 1, or 0 when the file is truncated
 * or the value out of range, with NN_E_FORMAT recorded (the field and its byte offset named; the
 * first problem found is the one reported). */
struct nn__plan_reader;
int nn__plan_reader_i32(struct nn__plan_reader *r, const char *field, int32_t *v);
int nn__plan_reader_u64(struct nn__plan_reader *r, const char *field, uint64_t *v);
/* A value in lo..hi. */
int nn__plan_reader_i32_in(struct nn__plan_reader *r, const char *field, int32_t lo, int32_t hi,
                           int32_t *v);
/* A value >= min. */
int nn__plan_reader_i64_min(struct nn__plan_reader *r, const char *field, int64_t min, int64_t *v);
/* An f64 that is finite. */
int nn__plan_reader_f64_finite(struct nn__plan_reader *r, const char *field, double *v);
/* The byte offset the next read starts at. */
size_t nn__plan_reader_pos(const struct nn__plan_reader *r);
/* Record that field, at byte offset, has problem (a static description); returns 0. */
int nn__plan_reader_bad(struct nn__plan_reader *r, size_t offset, const char *field,
                        const char *problem);

#endif
