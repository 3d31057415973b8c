/* The generic value-keyed cache of a context: live objects (plans, descriptor sets, ...) in one
 * bounded LRU, "known records" that say how to rebuild an object (loaded from a plan file, or
 * kept when their live object was evicted), and the statistics behind nn_plan_cache_stats.
 *
 * An entry is (kind, key, record, optional blob, live object):
 *   - the kind is a static table entry (struct nn__cache_kind) that an op family defines; the
 *     context assembly passes the table of every family's kinds to nn__cache_create(), so this
 *     layer knows no op;
 *   - the key is the family's own problem description: a plain value struct, zero-initialised
 *     (memset) before its fields are set, so that fields a problem does not use hold 0;
 *   - the record is a plain value struct saying how to rebuild the live object (for a graph plan:
 *     engine index and knobs); the blob is optional variable-length data (a plan's JSON form);
 *   - the live object is opaque here; the kind's destroy callback releases it.
 * Keys and records are described by one field list each (struct nn__field), which generates
 * equality, hashing and the plan file's encoding, so a family writes no compare/hash/encode code.
 *
 * Per op call a family does:
 *   1. fill its key (memset, then the fields, nn__cache_settings_fill() for the context settings
 *      that change the result);
 *   2. nn__cache_lookup(): a hit returns the live object and its record; nothing else is called
 *      and nothing is allocated;
 *   3. on a miss, nn__cache_lookup_known(): a record to rebuild from (count NN__PC_REBUILT); if the
 *      rebuild fails, nn__cache_drop_known() and fall through;
 *   4. build from scratch (heuristics, autotune, descriptor queries: count the events);
 *   5. nn__cache_insert() the live object with its record.
 *
 * One tuning per device: the caches of one device's contexts may join the device's shared tuning
 * (nn__cache_share_device()), a store of records only (no live objects), created by the first
 * cache that joins and freed with the last. Every record a cache inserts or replaces is
 * published there, and a known-record lookup that finds nothing in the cache itself copies the
 * store's record of the key into the cache's known records: another context's tuning is then
 * rebuilt (cheap: engine and knobs) instead of searched again. Live objects stay per cache, since
 * they are bound to their context's handle and freed by its thread.
 *
 * A cache is not thread-safe (one per context, and a context is used by one thread at a time);
 * the shared store is, behind its own mutex, held only to copy one record in or out: never on the
 * hit path (nn__cache_lookup() does not touch it) and never while anything is built. Nothing
 * here calls cuDNN, so the cache builds and is tested in every configuration. */
#ifndef NN_CUDNN_CACHE_H
#define NN_CUDNN_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "nnprim/plan_cache.h"
#include "nnprim/status.h"

struct nn_ctx;

/* ---------------------------------------------------------------------------------------------
 * Field lists
 */

enum nn__field_type {
    NN__FIELD_I32 = 1,
    NN__FIELD_U32 = 2,
    NN__FIELD_I64 = 3,
    NN__FIELD_U64 = 4,
    NN__FIELD_F64 = 5 /* compared and hashed by bit pattern: -0.0 and 0.0 are different keys */
};

/* count elements of one type at offset (an array member, or one scalar with count 1). Padding
 * between fields is never read, so it does not matter what it holds. */
struct nn__field {
    const char *name; /* for messages; NULL ends a field list */
    uint32_t offset;  /* offsetof() in the struct, a multiple of the type's width */
    uint16_t type;    /* enum nn__field_type */
    uint16_t count;   /* >= 1 */
};

#define NN__FIELD_WIDTH(type) ((type) == NN__FIELD_I32 || (type) == NN__FIELD_U32 ? 4u : 8u)

/* One field-list entry for member m of struct T (m may be nested or an array: "t[2].dims"). */
#define NN__FIELD(T, m, type)                                                                      \
    {                                                                                              \
#m, (uint32_t)offsetof(T, m), (type),                                                      \
            (uint16_t)(sizeof(((T *)0)->m) / NN__FIELD_WIDTH(type))                                \
    }
#define NN__FIELD_END                                                                              \
    {                                                                                              \
        NULL, 0, 0, 0                                                                              \
    }

/* The context settings that change what a family builds, as plain key fields: every family's key
 * embeds one (its position in the key is the family's choice) and fills it with
 * nn__cache_settings_fill(). */
struct nn__cache_settings {
    int32_t math_mode;      /* nn_math_mode */
    int32_t deterministic;  /* 0 or 1 */
    uint64_t workspace_cap; /* bytes, 0 = no cap */
};

/* The field-list entries of a struct nn__cache_settings member s of struct T. */
#define NN__CACHE_SETTINGS_FIELDS(T, s)                                                            \
    NN__FIELD(T, s.math_mode, NN__FIELD_I32), NN__FIELD(T, s.deterministic, NN__FIELD_I32),        \
        NN__FIELD(T, s.workspace_cap, NN__FIELD_U64)

/* Fill s from the context's settings. */
void nn__cache_settings_fill(const struct nn_ctx *ctx, struct nn__cache_settings *s);

/* Whether two keys' settings are the same (a loaded record's against the context's). */
int nn__cache_settings_equal(const struct nn__cache_settings *a,
                             const struct nn__cache_settings *b);

/* NULL if s holds valid values (for keys read from files), else a static description. */
const char *nn__cache_settings_invalid(const struct nn__cache_settings *s);

/* ---------------------------------------------------------------------------------------------
 * Kinds
 */

#define NN__CACHE_KIND_ID_MAX 63 /* ids are 1..this */
#define NN__CACHE_BLOB_MAX    (256 * 1024)
#define NN__CACHE_KNOWN_MAX   (1 << 20) /* known records kept (and records in a file) */

/* Bits of struct nn__cache_kind.flags. */
/* The kind's live objects are state of this process (device scratch, events, pinned buffers) and
 * its records say nothing worth rebuilding from: they are never written to a plan file
 * (nn__cache_visit() and nn__cache_add_missing() leave them out), never published to the
 * device's shared tuning and never kept as known records (an eviction drops the record,
 * nn__cache_add_known() refuses one); a plan file's record of the kind's id is skipped and
 * counted, as one of a kind the reader lacks. */
#define NN__CACHE_KIND_NOT_PERSISTED 1u

/* What a family tells the cache about one kind of entry. Define it as a static const table entry
 * of the family; the context assembly lists it in the table given to nn__cache_create(). */
struct nn__cache_kind {
    /* Written to plan files: never reuse or renumber an id; a key or record layout change gets
     * a new id (files holding the old one then skip its records). 1..NN__CACHE_KIND_ID_MAX, one
     * of the names of cache_kinds.h, which lists every id. */
    uint32_t id;
    const char *name; /* for messages ("graph plan") */
    uint32_t flags;   /* NN__CACHE_KIND_* bits, 0 for none */
    size_t key_size;
    const struct nn__field *key_fields; /* every byte that matters, NULL-name terminated */
    size_t record_size;
    const struct nn__field *record_fields;
    uint32_t blob_max; /* largest blob in bytes (<= NN__CACHE_BLOB_MAX); 0: the kind has none */
    /* Range checks of a key / a record with its blob length, as read from a file: NULL if valid,
     * else a static description of the first bad field. NULL hooks accept everything. */
    const char *(*key_invalid)(const void *key);
    const char *(*record_invalid)(const void *record, uint32_t blob_len);
    /* Optional: called on the cache's own copy of a record when it is stored, with the cache's
     * copy of the blob (NUL-terminated, "" when there is none), so a record can carry its blob's
     * address. */
    void (*bind_blob)(void *record, const char *blob, uint32_t blob_len);
    /* Releases a live object: called exactly once per inserted object, on eviction,
     * replacement, nn__cache_clear() or nn__cache_destroy(). */
    void (*destroy)(void *live);
    /* Optional: called on the loading thread after a plan file's records were added to a cuDNN
     * context's cache (with settings.prebuild_plans on), so a family can make the live objects of
     * its loaded records ready before their first call. It must leave ctx's last error as it was
     * and never fail the load. NULL: nothing is done at load. */
    void (*loaded)(struct nn_ctx *ctx);
};

/* ---------------------------------------------------------------------------------------------
 * The cache
 */

struct nn__cache;

/* Create an empty cache for the n kinds of table (pointers to static kinds, each id once) that
 * holds at most capacity live objects (>= 1) of all kinds together.
 * Returns NN_OK; NN_E_INVALID_ARG (capacity < 1, or a kind that is malformed: the message names
 * it and the problem); NN_E_OOM_HOST. */
nn_status nn__cache_create(struct nn_ctx *ctx, const struct nn__cache_kind *const *table, int n,
                           int capacity, struct nn__cache **out);

/* An empty cache with the same kinds as c (e.g. a scratch cache for a file being decoded). */
nn_status nn__cache_create_like(struct nn_ctx *ctx, const struct nn__cache *c, int capacity,
                                struct nn__cache **out);

/* Destroy every live object (through its kind's callback), the known records and the cache.
 * NULL is ok. */
void nn__cache_destroy(struct nn__cache *c);

/* While a cache is held (a count), a live object it lets go of (eviction, replacement, clear)
 * is kept until the count drops back to 0 and destroyed then: a CUDA graph captured from the
 * context's calls may run the kernels and read the buffers of such objects at every launch
 * (include/nnprim/graph.h). nn__cache_destroy() destroys everything whatever the count. */
void nn__cache_hold(struct nn__cache *c);
void nn__cache_release(struct nn__cache *c);

/* Drop every live object (through its callback) and every known record. Statistics are kept. */
void nn__cache_clear(struct nn__cache *c);

/* The kind with this id in c's table, or NULL. */
const struct nn__cache_kind *nn__cache_kind_of(const struct nn__cache *c, uint32_t id);

/* What an entry holds besides its live object. Valid until the entry is evicted, replaced,
 * dropped or the cache cleared. */
struct nn__cache_view {
    const void *record;
    const char *blob; /* NUL-terminated, "" when blob_len is 0 */
    uint32_t blob_len;
};

/* The live object for (kind, key), or NULL (also for a kind not in the table). A hit moves the
 * entry to the most-recently-used end and counts a hit; a miss counts a miss. *view (if view is
 * not NULL) receives the entry's record and blob (zeros on a miss). Never allocates, never
 * fails. */
void *nn__cache_lookup(struct nn__cache *c, uint32_t kind, const void *key,
                       struct nn__cache_view *view);

/* 1 if (kind, key) has a live object, else 0. Counts nothing and leaves the LRU order alone. */
int nn__cache_is_live(const struct nn__cache *c, uint32_t kind, const void *key);

/* The live entry's own record, which the caller may change in place (fields that are no key
 * and need no range check, such as a measured time), or NULL when there is no live entry. */
void *nn__cache_live_record(struct nn__cache *c, uint32_t kind, const void *key);

/* Insert a live object with its record and blob (both copied). On success the cache owns live
 * and calls the kind's destroy on it when it lets go of it; an existing live entry with an equal
 * key is replaced (its object destroyed); the least recently used entry is evicted when the cache
 * is full (its record is kept as a known record, so a later miss can rebuild it, unless its kind
 * is NN__CACHE_KIND_NOT_PERSISTED). A known record with an equal key is superseded; record and
 * blob may be that known record's own (they are copied before it goes). On failure nothing
 * changes and live stays the caller's.
 * Returns NN_OK; NN_E_INVALID_ARG (kind not in the table, NULL key/record/live, blob longer than
 * the kind's blob_max, or a record the kind's check refuses: named in the message);
 * NN_E_OOM_HOST. */
nn_status nn__cache_insert(struct nn_ctx *ctx, struct nn__cache *c, uint32_t kind, const void *key,
                           const void *record, const char *blob, uint32_t blob_len, void *live);

/* Replace the live object and/or the record of (kind, key), keeping its place in the LRU order
 * and the statistics. live NULL keeps the object; otherwise the old one is destroyed unless it is
 * live itself. record NULL keeps record and blob; otherwise both are replaced (copied).
 * Returns NN_OK; NN_E_INVALID_ARG (no live entry, or a record or blob the kind refuses: nothing
 * changes and live stays the caller's); NN_E_OOM_HOST (nothing changes). */
nn_status nn__cache_replace_live(struct nn_ctx *ctx, struct nn__cache *c, uint32_t kind,
                                 const void *key, void *live, const void *record, const char *blob,
                                 uint32_t blob_len);

/* The known record of (kind, key) (loaded from a plan file, or evicted earlier): its record, or
 * NULL; *view (if not NULL) receives record and blob. Valid until the next change of the cache.
 * When the cache has none and has joined its device's shared tuning, the store's record of the
 * key (if any) is first copied into the cache's known records (counted in shared_records; the
 * cache only learns what it could have been told, so it stays logically const); a copy that
 * runs out of host memory is left out, as if the store had none. */
const void *nn__cache_lookup_known(const struct nn__cache *c, uint32_t kind, const void *key,
                                   struct nn__cache_view *view);

/* Forget the known record of (kind, key) because rebuilding it failed; counts records_dropped.
 * The device's shared tuning forgets it too (it would fail the same way in another context of
 * the device). Returns 1 if the cache had one, else 0. */
int nn__cache_drop_known(struct nn__cache *c, uint32_t kind, const void *key);

/* Add a known record (as the file loader does), replacing one with an equal key.
 * Returns NN_OK; NN_E_INVALID_ARG (kind not in the table, a kind NN__CACHE_KIND_NOT_PERSISTED,
 * or a record the kind refuses);
 * NN_E_OVERFLOW (NN__CACHE_KNOWN_MAX known records already); NN_E_OOM_HOST (nothing changed). */
nn_status nn__cache_add_known(struct nn_ctx *ctx, struct nn__cache *c, uint32_t kind,
                              const void *key, const void *record, const char *blob,
                              uint32_t blob_len);

/* Add to dst's known records every record src would save (nn__cache_visit() order), then the
 * records of src's device's shared tuning, each only where dst has no record of its key yet (so
 * that callers add caches in order of precedence: the first record of a key wins). Records of
 * kinds dst does not have are left out; adding stops quietly at NN__CACHE_KNOWN_MAX records.
 * Counts nothing. Returns NN_OK; NN_E_OOM_HOST (dst keeps what was added before). */
nn_status nn__cache_add_missing(struct nn_ctx *ctx, struct nn__cache *dst,
                                const struct nn__cache *src);

/* Move every known record of src into dst's known records, oldest first (replacing equal keys; a
 * record whose key is live in dst is discarded, the live object wins; a kind dst does not have is
 * discarded) and count them as loaded in dst. src ends with no known records. On NN_E_OOM_HOST
 * neither cache changes. */
nn_status nn__cache_take_known(struct nn_ctx *ctx, struct nn__cache *dst, struct nn__cache *src);

/* Visit every record the cache would save (none of a kind NN__CACHE_KIND_NOT_PERSISTED): live
 * entries from most to least recently used, then known records oldest first. Stops early when fn
 * returns nonzero, and returns that value (0 if it visited all). */
typedef int (*nn__cache_visit_fn)(void *arg, const struct nn__cache_kind *kind, const void *key,
                                  const struct nn__cache_view *view);
int nn__cache_visit(const struct nn__cache *c, nn__cache_visit_fn fn, void *arg);

/* Number of live objects / known records (all kinds), and the capacity. */
size_t nn__cache_size(const struct nn__cache *c);
size_t nn__cache_known_count(const struct nn__cache *c);
int nn__cache_capacity(const struct nn__cache *c);

/* ---------------------------------------------------------------------------------------------
 * One tuning per device
 */

/* Join c to the shared tuning of device (any int naming the device; the cuDNN layer passes the
 * CUDA ordinal). The store is created by the first cache of the device that joins, with that
 * cache's kind table (a cache of another table shares only the kinds both have, by identity);
 * it keeps at most as many records as the largest capacity of the caches that joined (at least
 * NN__CACHE_SHARED_MIN), dropping the least recently published or fetched first. c leaves the
 * store in nn__cache_destroy(); the last cache to leave frees it. Thread-safe.
 * Returns NN_OK; NN_E_INVALID_ARG (c has joined already); NN_E_OOM_HOST (c stays alone). */
#define NN__CACHE_SHARED_MIN 256
nn_status nn__cache_share_device(struct nn_ctx *ctx, struct nn__cache *c, int device);

/* Forget every record of c's device's shared tuning (nothing if c has not joined): with
 * nn__cache_clear(), what nn_plan_cache_clear() does. */
void nn__cache_clear_shared(struct nn__cache *c);

/* Free c and its entries without calling any kind's destroy callback (its live objects are
 * abandoned) and without touching the shared store's mutex: for a child process after fork(),
 * where the live objects' library state and the store's lock may belong to threads that are
 * gone. The store itself (host memory, possibly locked) is abandoned too. NULL is allowed. */
void nn__cache_abandon(struct nn__cache *c);

/* ---------------------------------------------------------------------------------------------
 * Field-wise operations, for the plan file and for tests
 */

/* Field-wise equality of two keys of kind (padding ignored). */
int nn__cache_key_equal(const struct nn__cache_kind *kind, const void *a, const void *b);

/* A hash of a key of kind over the same fields (equal keys give equal hashes). */
uint64_t nn__cache_key_hash(const struct nn__cache_kind *kind, const void *key);

/* Bytes a field list takes in a plan file (each element at its width). */
size_t nn__field_list_encoded_size(const struct nn__field *fields);

/* Write the fields of struct s little-endian at out (nn__field_list_encoded_size() bytes). */
void nn__field_list_encode(const struct nn__field *fields, const void *s, unsigned char *out);

/* Read them back into s (which the caller zero-initialised). */
void nn__field_list_decode(const struct nn__field *fields, const unsigned char *in, void *s);

/* ---------------------------------------------------------------------------------------------
 * Statistics (the public nn_plan_cache_stats is filled from these)
 */

/* Events the families and the graph layer report; hits, misses, evictions, loaded, skipped and
 * dropped records are counted by the cache and the file loader themselves. */
enum nn__cache_event {
    NN__PC_HEURISTIC_QUERY,   /* one cudnn heuristics query (mode A or fallback) */
    NN__PC_PLAN_BUILT,        /* one execution plan finalized (autotune candidates included) */
    NN__PC_REBUILT,           /* a live object rebuilt from a known record */
    NN__PC_QUICK,             /* a known record started on its quick alternate */
    NN__PC_BACKGROUND_BUILT,  /* a tuned plan built in the background replaced its alternate */
    NN__PC_BACKGROUND_FAILED, /* a background build failed; the alternate stays */
    NN__PC_PREBUILT           /* a loaded record's plan, prebuilt in the background, went live */
};
void nn__cache_count(struct nn__cache *c, enum nn__cache_event e);

/* One autotune run (all candidates of one key) that took ns nanoseconds of host wall time. */
void nn__cache_count_autotune(struct nn__cache *c, uint64_t ns);

/* Count records of a file that were skipped (another cuDNN version or GPU, or a kind this
 * process does not have). */
void nn__cache_count_skipped(struct nn__cache *c, uint64_t n);

void nn__cache_get_stats(const struct nn__cache *c, nn_plan_cache_stats *out);

#endif
