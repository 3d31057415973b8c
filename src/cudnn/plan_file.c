/* The plan file: encoding, checked decoding, merging atomic save (under a flock() of path.lock),
 * load.
 *
 * Format version 3. Every integer is little-endian and fixed width (u32/i32/u64/i64); f64 is the
 * IEEE-754 bit pattern as a u64.
 *
 *   header   magic "NNPLANC\n" (8 bytes)
 *            u32 format version (3: a file of any other version is refused, NN_E_FORMAT)
 *            u64 cuDNN version of the writer (cudnnGetVersion())
 *            i32 cc_major, i32 cc_minor, i32 sm_count
 *            u32 name_len (< 256), name_len bytes of GPU name (no NUL)
 *            u32 record count (<= NN__CACHE_KNOWN_MAX)
 *   record   u32 body bytes (what follows, up to the next record)
 *            u32 kind id (struct nn__cache_kind.id)
 *            the key, field by field in the order of the kind's key field list, each array
 *                element at its field's width
 *            the record, likewise, by the kind's record field list
 *            u32 blob_len (<= the kind's blob_max), blob_len bytes
 *            A record of a kind the reading process does not have (a retired id, or one a
 *            newer build added), or has as NN__CACHE_KIND_NOT_PERSISTED (never written, but
 *            older writers did), is skipped whole by its body length and counted as skipped
 *            (records_skipped); for a kind it reads, the body must be exactly what the field
 *            lists take.
 *   trailer  u64 FNV-1a 64 of every byte before it
 *
 * The decoder trusts nothing: each read is bounds-checked against the file and each value
 * range-checked (by the kind's hooks), and any failure names the field and its byte offset. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/error.h"
#include "cudnn/plan_cache.h"
#include "cudnn/plan_file.h"
#include "nnprim/status.h"

#define PLAN_FILE_MAGIC    "NNPLANC\n"
#define PLAN_FILE_VERSION  3u /* written, and the only one read */
#define PLAN_FILE_MAX_SIZE ((size_t)256 << 20)

static uint64_t fnv1a64(const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3u;
    return h;
}

/* ---------------------------------------------------------------------------------------------
 * Encoding: a sizing pass (buf NULL) and a writing pass over the same code.
 */

struct writer {
    unsigned char *buf; /* NULL while sizing */
    size_t pos;
};

static void put_bytes(struct writer *w, const void *p, size_t n)
{
    if (w->buf && n) memcpy(w->buf + w->pos, p, n);
    w->pos += n;
}

static void put_u32(struct writer *w, uint32_t v)
{
    unsigned char b[4];
    for (int i = 0; i < 4; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    put_bytes(w, b, 4);
}

static void put_u64(struct writer *w, uint64_t v)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    put_bytes(w, b, 8);
}

static void put_i32(struct writer *w, int32_t v)
{
    put_u32(w, (uint32_t)v);
}

/* The fields of a key or record, through the field list's own encoder. */
static void put_fields(struct writer *w, const struct nn__field *fields, const void *v)
{
    size_t n = nn__field_list_encoded_size(fields);
    if (w->buf) nn__field_list_encode(fields, v, w->buf + w->pos);
    w->pos += n;
}

static void put_record_body(struct writer *w, const struct nn__cache_kind *kind, const void *key,
                            const struct nn__cache_view *v)
{
    put_u32(w, kind->id);
    put_fields(w, kind->key_fields, key);
    put_fields(w, kind->record_fields, v->record);
    put_u32(w, v->blob_len);
    put_bytes(w, v->blob, v->blob_len);
}

struct encode_state {
    struct writer w;
    uint32_t count;
};

static int encode_record(void *arg, const struct nn__cache_kind *kind, const void *key,
                         const struct nn__cache_view *v)
{
    struct encode_state *s = arg;
    struct writer sizer = {NULL, 0};
    put_record_body(&sizer, kind, key, v);
    put_u32(&s->w, (uint32_t)sizer.pos);
    put_record_body(&s->w, kind, key, v);
    s->count++;
    return 0;
}

static void encode_all(struct encode_state *s, const struct nn__cache *c, uint64_t cudnn_version,
                       const struct nn__gpu_id *gpu, uint32_t count)
{
    size_t name_len = strnlen(gpu->name, NN__GPU_NAME_MAX - 1);
    put_bytes(&s->w, PLAN_FILE_MAGIC, 8);
    put_u32(&s->w, PLAN_FILE_VERSION);
    put_u64(&s->w, cudnn_version);
    put_i32(&s->w, gpu->cc_major);
    put_i32(&s->w, gpu->cc_minor);
    put_i32(&s->w, gpu->sm_count);
    put_u32(&s->w, (uint32_t)name_len);
    put_bytes(&s->w, gpu->name, name_len);
    put_u32(&s->w, count);
    nn__cache_visit(c, encode_record, s);
}

nn_status nn__plan_file_encode(struct nn_ctx *ctx, const struct nn__cache *c,
                               uint64_t cudnn_version, const struct nn__gpu_id *gpu,
                               unsigned char **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    struct encode_state size = {{NULL, 0}, 0};
    encode_all(&size, c, cudnn_version, gpu, 0);
    if (size.count > NN__CACHE_KNOWN_MAX)
        return NN__FAIL(ctx, NN_E_OVERFLOW, "plan file: %u records, the format holds at most %d",
                        size.count, NN__CACHE_KNOWN_MAX);
    size_t total = size.w.pos + 8;
    unsigned char *buf = nn__host_alloc(total);
    if (!buf) return NN__FAIL(ctx, NN_E_OOM_HOST, "plan file: out of host memory");
    struct encode_state s = {{buf, 0}, 0};
    encode_all(&s, c, cudnn_version, gpu, size.count);
    put_u64(&s.w, fnv1a64(buf, s.w.pos));
    *out = buf;
    *out_len = total;
    return NN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Decoding
 */

struct nn__plan_reader {
    struct nn_ctx *ctx;
    const char *what; /* the path, for messages */
    const unsigned char *buf;
    size_t len, pos;
    long record; /* index of the record being read, -1 in the header */
    nn_status status;
};

/* Records NN_E_FORMAT once (the first problem found is the one reported). */
static int bad(struct nn__plan_reader *r, size_t offset, const char *field, const char *problem)
{
    if (r->status != NN_OK) return 0;
    char where[32] = "";
    if (r->record >= 0) snprintf(where, sizeof where, "record %ld ", r->record);
    r->status = NN__FAIL(r->ctx, NN_E_FORMAT, "plan file %s: %s%s at byte offset %zu: %s", r->what,
                         where, field, offset, problem);
    return 0;
}

static int need(struct nn__plan_reader *r, size_t n, const char *field)
{
    if (r->status != NN_OK) return 0;
    if (r->len - r->pos >= n) return 1;
    char msg[96];
    snprintf(msg, sizeof msg, "truncated (needs %zu bytes, the file ends at %zu)", n, r->len);
    return bad(r, r->pos, field, msg);
}

static int get_u32(struct nn__plan_reader *r, const char *field, uint32_t *v)
{
    if (!need(r, 4, field)) return 0;
    uint32_t x = 0;
    for (int i = 0; i < 4; i++)
        x |= (uint32_t)r->buf[r->pos + (size_t)i] << (8 * i);
    r->pos += 4;
    *v = x;
    return 1;
}

static int get_u64(struct nn__plan_reader *r, const char *field, uint64_t *v)
{
    if (!need(r, 8, field)) return 0;
    uint64_t x = 0;
    for (int i = 0; i < 8; i++)
        x |= (uint64_t)r->buf[r->pos + (size_t)i] << (8 * i);
    r->pos += 8;
    *v = x;
    return 1;
}

static int get_i32(struct nn__plan_reader *r, const char *field, int32_t *v)
{
    uint32_t u;
    if (!get_u32(r, field, &u)) return 0;
    *v = (int32_t)u;
    return 1;
}

struct header {
    uint64_t cudnn_version;
    struct nn__gpu_id gpu;
    uint32_t count;
};

static int get_header(struct nn__plan_reader *r, struct header *h)
{
    if (!need(r, 8, "magic")) return 0;
    if (memcmp(r->buf, PLAN_FILE_MAGIC, 8) != 0)
        return bad(r, 0, "magic", "not an nnprim plan file");
    r->pos = 8;
    uint32_t version;
    if (!get_u32(r, "format version", &version)) return 0;
    if (version != PLAN_FILE_VERSION) {
        char msg[160];
        snprintf(msg, sizeof msg,
                 "the file is format version %u, this build reads version %u only (delete it: "
                 "the plans are tuned again and saved in version %u)",
                 version, PLAN_FILE_VERSION, PLAN_FILE_VERSION);
        return bad(r, 8, "format version", msg);
    }
    memset(&h->gpu, 0, sizeof h->gpu);
    uint32_t name_len;
    if (!get_u64(r, "cudnn version", &h->cudnn_version) ||
        !get_i32(r, "cc_major", &h->gpu.cc_major) || !get_i32(r, "cc_minor", &h->gpu.cc_minor) ||
        !get_i32(r, "sm_count", &h->gpu.sm_count) || !get_u32(r, "gpu name length", &name_len))
        return 0;
    if (name_len >= NN__GPU_NAME_MAX) return bad(r, r->pos - 4, "gpu name length", "is >= 256");
    if (!need(r, name_len, "gpu name")) return 0;
    memcpy(h->gpu.name, r->buf + r->pos, name_len);
    if (memchr(h->gpu.name, '\0', name_len)) return bad(r, r->pos, "gpu name", "contains a NUL");
    r->pos += name_len;
    size_t at = r->pos;
    if (!get_u32(r, "record count", &h->count)) return 0;
    if (h->count > NN__CACHE_KNOWN_MAX) return bad(r, at, "record count", "exceeds 1048576");
    return 1;
}

static int same_identity(const struct header *h, uint64_t cudnn_version,
                         const struct nn__gpu_id *gpu)
{
    return h->cudnn_version == cudnn_version && h->gpu.cc_major == gpu->cc_major &&
           h->gpu.cc_minor == gpu->cc_minor && h->gpu.sm_count == gpu->sm_count &&
           strncmp(h->gpu.name, gpu->name, NN__GPU_NAME_MAX - 1) == 0;
}

/* One record of a kind the cache has, after its kind id: key, record and blob, decoded into
 * buffers of their sizes (zeroed by the caller) and range-checked by the hooks. body is the body
 * length, start its first byte. */
static int read_fields(struct nn__plan_reader *r, const struct nn__cache_kind *kind, uint32_t body,
                       size_t start, void *key, void *rec, uint32_t *blob_len)
{
    size_t klen = nn__field_list_encoded_size(kind->key_fields),
           rlen = nn__field_list_encoded_size(kind->record_fields);
    if (!need(r, klen, "key")) return 0;
    size_t at = r->pos;
    nn__field_list_decode(kind->key_fields, r->buf + r->pos, key);
    r->pos += klen;
    const char *problem = kind->key_invalid ? kind->key_invalid(key) : NULL;
    if (problem) return bad(r, at, "key", problem);
    if (!need(r, rlen, "record")) return 0;
    size_t rec_at = r->pos;
    nn__field_list_decode(kind->record_fields, r->buf + r->pos, rec);
    r->pos += rlen;
    at = r->pos;
    if (!get_u32(r, "blob_len", blob_len)) return 0;
    if (*blob_len > kind->blob_max) {
        char msg[96];
        snprintf(msg, sizeof msg, "%u bytes, a %s holds at most %u", *blob_len, kind->name,
                 kind->blob_max);
        return bad(r, at, "blob_len", msg);
    }
    problem = kind->record_invalid ? kind->record_invalid(rec, *blob_len) : NULL;
    if (problem) return bad(r, rec_at, "record", problem);
    if (!need(r, *blob_len, "blob")) return 0;
    r->pos += *blob_len;
    if (r->pos - start != body) {
        char msg[96];
        snprintf(msg, sizeof msg, "says %u bytes, the fields of a %s take %zu", body, kind->name,
                 r->pos - start);
        return bad(r, start - 4, "body length", msg);
    }
    return 1;
}

/* Where a file's records go: the scratch cache (when the file is trusted), and how many were
 * skipped. */
struct sink {
    struct nn__cache *scratch; /* NULL: the file is of another cuDNN version or GPU */
    uint64_t skipped;
};

static int add(struct nn__plan_reader *r, struct sink *s, uint32_t kind, const void *key,
               const void *rec, const char *blob, uint32_t blob_len)
{
    if (!s->scratch) return 1;
    if (nn__cache_add_known(r->ctx, s->scratch, kind, key, rec, blob, blob_len) == NN_OK) return 1;
    r->status = nn__error_rethrow(r->ctx, "plan file");
    return 0;
}

static int read_record(struct nn__plan_reader *r, struct nn__cache *c, struct sink *s)
{
    uint32_t body, id;
    if (!get_u32(r, "body length", &body)) return 0;
    size_t start = r->pos;
    if (!need(r, body, "record body") || !get_u32(r, "kind", &id)) return 0;
    const struct nn__cache_kind *kind = nn__cache_kind_of(c, id);
    /* A kind that keeps nothing across processes: an older writer's records of it are read as
     * a kind this process lacks. */
    if (kind && (kind->flags & NN__CACHE_KIND_NOT_PERSISTED)) kind = NULL;
    if (!kind) {
        if (body < 4) return bad(r, start - 4, "body length", "is shorter than the kind id");
        r->pos = start + body;
        s->skipped++;
        return 1;
    }
    /* One buffer: the key, then the record. */
    unsigned char *key = nn__host_calloc(1, kind->key_size + kind->record_size);
    if (!key) {
        r->status = NN__FAIL(r->ctx, NN_E_OOM_HOST, "plan file %s: out of host memory", r->what);
        return 0;
    }
    uint32_t blob_len = 0;
    unsigned char *rec = key + kind->key_size;
    int ok = read_fields(r, kind, body, start, key, rec, &blob_len);
    if (ok) ok = add(r, s, kind->id, key, rec, (const char *)r->buf + r->pos - blob_len, blob_len);
    nn__host_free(key);
    return ok;
}

/* Every record goes into a scratch cache first; only a file that checks out completely reaches
 * the context's cache, in one step that cannot half-fail. */
nn_status nn__plan_file_decode(struct nn_ctx *ctx, struct nn__cache *c, const char *what,
                               const unsigned char *buf, size_t len, uint64_t cudnn_version,
                               const struct nn__gpu_id *gpu)
{
    struct nn__plan_reader r = {ctx, what, buf, len, 0, -1, NN_OK};
    struct header h;
    if (!get_header(&r, &h)) return r.status;
    struct sink s = {NULL, 0};
    if (same_identity(&h, cudnn_version, gpu))
        NN__TRY(nn__cache_create_like(ctx, c, 1, &s.scratch));
    for (uint32_t i = 0; i < h.count; i++) {
        r.record = (long)i;
        if (!read_record(&r, c, &s)) break;
    }
    r.record = -1;
    size_t at = r.pos;
    uint64_t sum;
    if (r.status == NN_OK && get_u64(&r, "checksum", &sum) && sum != fnv1a64(buf, at))
        bad(&r, at, "checksum", "does not match the contents (the file is corrupted)");
    if (r.status == NN_OK && r.pos != len) bad(&r, r.pos, "end", "extra bytes after the checksum");
    if (r.status == NN_OK) {
        if (s.scratch) {
            r.status = nn__cache_take_known(ctx, c, s.scratch);
            if (r.status == NN_OK) nn__cache_count_skipped(c, s.skipped);
        } else {
            nn__cache_count_skipped(c, h.count);
        }
    }
    nn__cache_destroy(s.scratch);
    return r.status;
}

/* ---------------------------------------------------------------------------------------------
 * Files
 */

static nn_status io_fail(struct nn_ctx *ctx, const char *what, const char *path, int err)
{
    return NN__FAIL(ctx, NN_E_IO, "plan file %s: %s failed: %s", path, what, strerror(err));
}

static int write_all(int fd, const unsigned char *p, size_t n)
{
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k < 0) {
            if (errno == EINTR) continue;
            return 0;
        }
        p += k;
        n -= (size_t)k;
    }
    return 1;
}

/* The directory entry of the rename must reach the disk too; a failure here only weakens
 * durability after a crash, never the file's integrity, so it is not reported. */
static void sync_parent_dir(const char *path)
{
    char *dir = nn__host_strdup(path);
    if (!dir) return;
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        slash[1] = '\0';
    else if (slash)
        *slash = '\0';
    int fd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    nn__host_free(dir);
}

/* A temporary file beside path, written with buf, synced and renamed over path. */
static nn_status replace_file(struct nn_ctx *ctx, const char *path, const unsigned char *buf,
                              size_t len)
{
    size_t plen = strlen(path);
    char *tmp = nn__host_alloc(plen + sizeof ".XXXXXX");
    if (!tmp) return NN__FAIL(ctx, NN_E_OOM_HOST, "plan file: out of host memory");
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".XXXXXX", sizeof ".XXXXXX");
    nn_status st = NN_OK;
    int fd = mkstemp(tmp);
    if (fd < 0) {
        st = io_fail(ctx, "creating a temporary file beside it", path, errno);
    } else {
        const char *step = NULL;
        if (!write_all(fd, buf, len))
            step = "writing";
        else if (fchmod(fd, 0644) != 0)
            step = "setting the mode of";
        else if (fsync(fd) != 0)
            step = "syncing";
        int err = errno;
        if (close(fd) != 0 && !step) {
            step = "closing";
            err = errno;
        }
        if (!step && rename(tmp, path) != 0) {
            step = "renaming the temporary file over";
            err = errno;
        }
        if (step) {
            unlink(tmp);
            st = io_fail(ctx, step, path, err);
        } else {
            sync_parent_dir(path);
        }
    }
    nn__host_free(tmp);
    return st;
}

/* The records of c (and of its device's shared tuning), then those of the file already at path
 * that c has no record of, in one new cache (nn__cache_destroy it). The caller holds the lock. */
static nn_status merged_records(struct nn_ctx *ctx, const struct nn__cache *c, const char *path,
                                uint64_t cudnn_version, const struct nn__gpu_id *gpu,
                                struct nn__cache **out)
{
    *out = NULL;
    struct nn__cache *m = NULL, *old = NULL;
    NN__TRY(nn__cache_create_like(ctx, c, 1, &m));
    nn_status st = nn__cache_add_missing(ctx, m, c);
    struct stat sb;
    int exists = st == NN_OK && stat(path, &sb) == 0;
    if (st == NN_OK && !exists && errno != ENOENT) st = io_fail(ctx, "stat", path, errno);
    /* An empty file holds nothing to keep (mkstemp() makes one to reserve a name). */
    if (exists && S_ISREG(sb.st_mode) && sb.st_size == 0) exists = 0;
    if (exists) {
        /* Records of another cuDNN version or GPU are skipped here, so they are not kept: the
         * file's header holds one identity, this process's. */
        st = nn__cache_create_like(ctx, c, 1, &old);
        if (st == NN_OK) st = nn__plan_file_load(ctx, old, path, cudnn_version, gpu);
        if (st == NN_E_FORMAT) {
            char why[NN_ERROR_MESSAGE_MAX];
            snprintf(why, sizeof why, "%s", nn_last_error()->message);
            st = NN__FAIL(ctx, NN_E_FORMAT,
                          "%s (the file is left as it is, not overwritten: remove it or save to "
                          "another path)",
                          why);
        }
        if (st == NN_OK) st = nn__cache_add_missing(ctx, m, old);
        nn__cache_destroy(old);
    }
    if (st != NN_OK) {
        nn__cache_destroy(m);
        return st;
    }
    *out = m;
    return NN_OK;
}

/* Savers of one path take an exclusive flock() of path.lock around read-merge-rename, so that
 * each one merges what the previous one wrote. The lock file stays: removing it would let a
 * saver lock a file another one has just unlinked. */
nn_status nn__plan_file_save(struct nn_ctx *ctx, const struct nn__cache *c, const char *path,
                             uint64_t cudnn_version, const struct nn__gpu_id *gpu)
{
    size_t plen = strlen(path);
    char *lock_path = nn__host_alloc(plen + sizeof ".lock");
    if (!lock_path) return NN__FAIL(ctx, NN_E_OOM_HOST, "plan file: out of host memory");
    memcpy(lock_path, path, plen);
    memcpy(lock_path + plen, ".lock", sizeof ".lock");
    int lock = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    nn__host_free(lock_path);
    if (lock < 0) return io_fail(ctx, "creating its lock file (path.lock)", path, errno);
    int r;
    while ((r = flock(lock, LOCK_EX)) != 0 && errno == EINTR)
        ;
    nn_status st = r != 0 ? io_fail(ctx, "locking (flock of path.lock)", path, errno) : NN_OK;
    struct nn__cache *m = NULL;
    unsigned char *buf = NULL;
    size_t len = 0;
    if (st == NN_OK) st = merged_records(ctx, c, path, cudnn_version, gpu, &m);
    if (st == NN_OK) st = nn__plan_file_encode(ctx, m, cudnn_version, gpu, &buf, &len);
    if (st == NN_OK) st = replace_file(ctx, path, buf, len);
    nn__host_free(buf);
    nn__cache_destroy(m);
    close(lock); /* releases the lock */
    return st;
}

nn_status nn__plan_file_load(struct nn_ctx *ctx, struct nn__cache *c, const char *path,
                             uint64_t cudnn_version, const struct nn__gpu_id *gpu)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return io_fail(ctx, "opening", path, errno);
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int err = errno;
        close(fd);
        return io_fail(ctx, "stat", path, err);
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return NN__FAIL(ctx, NN_E_IO, "plan file %s: not a regular file", path);
    }
    if ((uint64_t)sb.st_size > PLAN_FILE_MAX_SIZE) {
        close(fd);
        return NN__FAIL(ctx, NN_E_FORMAT,
                        "plan file %s: %lld bytes, more than a plan file may hold (%zu)", path,
                        (long long)sb.st_size, PLAN_FILE_MAX_SIZE);
    }
    size_t len = (size_t)sb.st_size;
    unsigned char *buf = nn__host_alloc(len);
    if (!buf) {
        close(fd);
        return NN__FAIL(ctx, NN_E_OOM_HOST, "plan file %s: out of host memory", path);
    }
    /* A file that shrinks under us reads short and is then rejected as truncated. */
    size_t got = 0;
    int err = 0;
    while (got < len) {
        ssize_t k = read(fd, buf + got, len - got);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) err = errno;
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fd);
    nn_status st = err ? io_fail(ctx, "reading", path, err)
                       : nn__plan_file_decode(ctx, c, path, buf, got, cudnn_version, gpu);
    nn__host_free(buf);
    return st;
}
