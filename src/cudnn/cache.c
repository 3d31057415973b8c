/* The generic cache: one chained hash table of live entries threaded on an LRU list, and a second
 * table of known records. Keys are compared and hashed over the byte runs their field list covers,
 * merged once per kind at creation, so the hit path is a hash, a bucket walk and a memcmp. A
 * device's shared tuning is a cache of its own (known records only) behind a mutex. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/ctx.h"
#include "core/error.h"
#include "cudnn/cache.h"

/* ---------------------------------------------------------------------------------------------
 * Settings and field lists
 */

void nn__cache_settings_fill(const struct nn_ctx *ctx, struct nn__cache_settings *s)
{
    s->math_mode = ctx->settings.math_mode;
    s->deterministic = ctx->settings.deterministic ? 1 : 0;
    s->workspace_cap = ctx->settings.workspace_cap;
}

int nn__cache_settings_equal(const struct nn__cache_settings *a, const struct nn__cache_settings *b)
{
    return a->math_mode == b->math_mode && a->deterministic == b->deterministic &&
           a->workspace_cap == b->workspace_cap;
}

const char *nn__cache_settings_invalid(const struct nn__cache_settings *s)
{
    if (s->math_mode != NN_MATH_STRICT_FP32 && s->math_mode != NN_MATH_TF32)
        return "math_mode is not an nn_math_mode";
    if (s->deterministic != 0 && s->deterministic != 1) return "deterministic is not 0 or 1";
    return NULL;
}

size_t nn__field_list_encoded_size(const struct nn__field *fields)
{
    size_t n = 0;
    for (const struct nn__field *f = fields; f->name; f++)
        n += (size_t)NN__FIELD_WIDTH(f->type) * f->count;
    return n;
}

void nn__field_list_encode(const struct nn__field *fields, const void *s, unsigned char *out)
{
    const unsigned char *base = s;
    for (const struct nn__field *f = fields; f->name; f++) {
        unsigned w = NN__FIELD_WIDTH(f->type);
        for (unsigned i = 0; i < f->count; i++) {
            uint64_t v;
            if (w == 4) {
                uint32_t u;
                memcpy(&u, base + f->offset + (size_t)i * 4, 4);
                v = u;
            } else {
                memcpy(&v, base + f->offset + (size_t)i * 8, 8);
            }
            for (unsigned b = 0; b < w; b++)
                *out++ = (unsigned char)(v >> (8 * b));
        }
    }
}

void nn__field_list_decode(const struct nn__field *fields, const unsigned char *in, void *s)
{
    unsigned char *base = s;
    for (const struct nn__field *f = fields; f->name; f++) {
        unsigned w = NN__FIELD_WIDTH(f->type);
        for (unsigned i = 0; i < f->count; i++) {
            uint64_t v = 0;
            for (unsigned b = 0; b < w; b++)
                v |= (uint64_t)*in++ << (8 * b);
            if (w == 4) {
                uint32_t u = (uint32_t)v;
                memcpy(base + f->offset + (size_t)i * 4, &u, 4);
            } else {
                memcpy(base + f->offset + (size_t)i * 8, &v, 8);
            }
        }
    }
}

/* ---------------------------------------------------------------------------------------------
 * Kinds as the cache keeps them: the byte runs of the key
 */

struct run {
    uint32_t offset, len; /* len is a multiple of 4 */
};

struct slot {
    const struct nn__cache_kind *kind;
    struct run *runs;
    int nruns;
    struct nn__cache *cache; /* the cache the slot is of */
};

/* NULL if the field list fits a struct of size bytes, else the problem. */
static const char *fields_invalid(const struct nn__field *fields, size_t size)
{
    if (!fields) return "has no field list";
    int n = 0;
    for (const struct nn__field *f = fields; f->name; f++, n++) {
        if (f->type < NN__FIELD_I32 || f->type > NN__FIELD_F64) return "has a field of no type";
        unsigned w = NN__FIELD_WIDTH(f->type);
        if (f->count < 1) return "has a field with count 0";
        if (f->offset % w) return "has a misaligned field";
        if ((size_t)f->offset + (size_t)w * f->count > size) return "has a field past its struct";
    }
    return n ? NULL : "has an empty field list";
}

static const char *kind_invalid(const struct nn__cache_kind *k)
{
    if (k->id < 1 || k->id > NN__CACHE_KIND_ID_MAX) return "id is outside 1..63";
    if (!k->name) return "has no name";
    if (!k->destroy) return "has no destroy callback";
    if (k->blob_max > NN__CACHE_BLOB_MAX) return "blob_max exceeds 256 KiB";
    if (k->flags & ~NN__CACHE_KIND_NOT_PERSISTED) return "has unknown flag bits";
    const char *bad = fields_invalid(k->key_fields, k->key_size);
    return bad ? bad : fields_invalid(k->record_fields, k->record_size);
}

/* 0 for a kind whose records are never saved, shared or kept (NN__CACHE_KIND_NOT_PERSISTED). */
static int persisted(const struct nn__cache_kind *k)
{
    return !(k->flags & NN__CACHE_KIND_NOT_PERSISTED);
}

static int run_cmp(const void *a, const void *b)
{
    const struct run *x = a, *y = b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* The key's fields as sorted, merged byte runs. Returns 0 on allocation failure. */
static int slot_init(struct slot *s, const struct nn__cache_kind *k)
{
    int n = 0;
    for (const struct nn__field *f = k->key_fields; f->name; f++)
        n++;
    s->kind = k;
    s->runs = nn__host_calloc((size_t)n, sizeof *s->runs);
    if (!s->runs) return 0;
    for (int i = 0; i < n; i++) {
        const struct nn__field *f = &k->key_fields[i];
        s->runs[i].offset = f->offset;
        s->runs[i].len = NN__FIELD_WIDTH(f->type) * f->count;
    }
    qsort(s->runs, (size_t)n, sizeof *s->runs, run_cmp);
    int m = 0;
    for (int i = 0; i < n; i++) {
        struct run r = s->runs[i];
        if (m && s->runs[m - 1].offset + s->runs[m - 1].len >= r.offset) {
            uint32_t end = r.offset + r.len, prev_end = s->runs[m - 1].offset + s->runs[m - 1].len;
            if (end > prev_end) s->runs[m - 1].len = end - s->runs[m - 1].offset;
        } else {
            s->runs[m++] = r;
        }
    }
    s->nruns = m;
    return 1;
}

static int runs_equal(const struct slot *s, const void *a, const void *b)
{
    const unsigned char *x = a, *y = b;
    for (int i = 0; i < s->nruns; i++)
        if (memcmp(x + s->runs[i].offset, y + s->runs[i].offset, s->runs[i].len)) return 0;
    return 1;
}

/* One multiply-xorshift round per 64-bit word: cheap on the hit path, and every bit of the word
 * reaches the state. */
static uint64_t mix(uint64_t h, uint64_t v)
{
    h = (h ^ v) * 0x9e3779b97f4a7c15u;
    return h ^ (h >> 29);
}

static uint64_t word_at(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Four independent lanes over the key's 8-byte words, in scalar variables so they stay in
 * registers and the multiplies of consecutive words overlap instead of waiting for each other
 * (graph-plan keys are about 1 KB, and this runs on every lookup, hits included); the lanes are
 * mixed fully at the end. */
static uint64_t runs_hash(const struct slot *s, const void *key)
{
    const uint64_t m = 0x9e3779b97f4a7c15u;
    const unsigned char *p = key;
    uint64_t h0 = 0xcbf29ce484222325u, h1 = 0x84222325cbf29ce4u, h2 = 0x632be59bd9b4e019u,
             h3 = s->kind->id;
    for (int i = 0; i < s->nruns; i++) {
        const unsigned char *q = p + s->runs[i].offset, *end = q + s->runs[i].len;
        for (; q + 32 <= end; q += 32) {
            h0 = (h0 ^ word_at(q)) * m;
            h1 = (h1 ^ word_at(q + 8)) * m;
            h2 = (h2 ^ word_at(q + 16)) * m;
            h3 = (h3 ^ word_at(q + 24)) * m;
        }
        for (; q + 8 <= end; q += 8)
            h0 = (h0 ^ word_at(q)) * m;
        if (q < end) { /* runs are whole 4-byte fields */
            uint32_t v;
            memcpy(&v, q, sizeof v);
            h1 = (h1 ^ v) * m;
        }
    }
    return mix(mix(mix(mix(0, h0), h1), h2), h3);
}

/* Field by field (no runs to build, so no allocation): the same equality as the cache's, and a
 * hash with the same property (equal keys, equal hashes). */
int nn__cache_key_equal(const struct nn__cache_kind *kind, const void *a, const void *b)
{
    const unsigned char *x = a, *y = b;
    for (const struct nn__field *f = kind->key_fields; f->name; f++)
        if (memcmp(x + f->offset, y + f->offset, (size_t)NN__FIELD_WIDTH(f->type) * f->count))
            return 0;
    return 1;
}

uint64_t nn__cache_key_hash(const struct nn__cache_kind *kind, const void *key)
{
    const unsigned char *p = key;
    uint64_t h = mix(0xcbf29ce484222325u, kind->id);
    for (const struct nn__field *f = kind->key_fields; f->name; f++) {
        unsigned w = NN__FIELD_WIDTH(f->type);
        for (unsigned i = 0; i < f->count; i++) {
            uint64_t v = 0;
            memcpy(&v, p + f->offset + (size_t)i * w, w);
            h = mix(h, v);
        }
    }
    return h;
}

/* ---------------------------------------------------------------------------------------------
 * Entries and tables
 */

struct entry {
    const struct slot *slot;
    uint64_t hash;
    void *key, *record; /* in the same allocation, after the entry */
    char *blob;         /* likewise, NUL-terminated */
    uint32_t blob_len;
    void *live;                /* live entries only */
    struct entry *chain;       /* next in the hash bucket */
    struct entry *prev, *next; /* LRU list (live) or insertion order (known) */
};

struct table {
    struct entry **buckets; /* power-of-two count, or NULL when empty */
    size_t nbuckets;
    size_t count;
    struct entry list; /* sentinel: list.next is the newest (MRU), list.prev the oldest */
};

/* A live object let go of while the cache is held (nn__cache_hold). */
struct doomed {
    const struct nn__cache_kind *kind;
    void *live;
    struct doomed *next;
};

struct nn__cache {
    int held;              /* nn__cache_hold() count */
    struct doomed *doomed; /* destroyed when held drops to 0 */
    int capacity;
    const struct nn__cache_kind *const *table; /* as given, for nn__cache_create_like() */
    int nkinds;
    struct slot slots[NN__CACHE_KIND_ID_MAX + 1]; /* by id; kind NULL = no such kind */
    struct table live, known;
    nn_plan_cache_stats stats;
    struct nn__cache_shared *shared; /* the device's shared tuning, or NULL */
};

/* A device's shared tuning: records only, so freeing it calls no kind's destroy callback. */
struct nn__cache_shared {
    pthread_mutex_t mu;        /* guards records and bound */
    struct nn__cache *records; /* known records; the LRU order is the list's */
    size_t bound;
    int device, refs; /* refs and next: under registry_mu */
    struct nn__cache_shared *next;
};

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static struct nn__cache_shared *registry;

static void list_unlink(struct entry *e)
{
    e->prev->next = e->next;
    e->next->prev = e->prev;
}

static void list_push_front(struct entry *head, struct entry *e)
{
    e->next = head->next;
    e->prev = head;
    head->next->prev = e;
    head->next = e;
}

static void table_init(struct table *t)
{
    t->buckets = NULL;
    t->nbuckets = 0;
    t->count = 0;
    t->list.next = t->list.prev = &t->list;
}

static struct entry *table_find(const struct table *t, const struct slot *s, const void *key,
                                uint64_t hash)
{
    if (!t->nbuckets) return NULL;
    for (struct entry *e = t->buckets[hash & (t->nbuckets - 1)]; e; e = e->chain)
        if (e->hash == hash && e->slot == s && runs_equal(s, e->key, key)) return e;
    return NULL;
}

/* Make room for n more entries (load factor <= 1). The only allocation a table makes, so callers
 * reserve first and then change things without failing. */
static int table_reserve(struct table *t, size_t n)
{
    if (t->count + n <= t->nbuckets) return 1;
    size_t nb = t->nbuckets ? t->nbuckets : 16;
    while (nb < t->count + n)
        nb *= 2;
    struct entry **b = nn__host_calloc(nb, sizeof *b);
    if (!b) return 0;
    for (size_t i = 0; i < t->nbuckets; i++) {
        for (struct entry *e = t->buckets[i], *next; e; e = next) {
            next = e->chain;
            e->chain = b[e->hash & (nb - 1)];
            b[e->hash & (nb - 1)] = e;
        }
    }
    nn__host_free(t->buckets);
    t->buckets = b;
    t->nbuckets = nb;
    return 1;
}

/* Needs a prior table_reserve(t, 1). */
static void table_add(struct table *t, struct entry *e)
{
    struct entry **slot = &t->buckets[e->hash & (t->nbuckets - 1)];
    e->chain = *slot;
    *slot = e;
    list_push_front(&t->list, e);
    t->count++;
}

static void table_remove(struct table *t, struct entry *e)
{
    struct entry **p = &t->buckets[e->hash & (t->nbuckets - 1)];
    while (*p != e)
        p = &(*p)->chain;
    *p = e->chain;
    list_unlink(e);
    t->count--;
}

/* A live object's end: at once, or when the cache is no longer held. Should the host have no
 * memory to remember it, it is leaked rather than destroyed under a graph that may use it. */
static void live_destroy(const struct slot *s, void *live)
{
    struct nn__cache *c = s->cache;
    if (!c || !c->held) {
        s->kind->destroy(live);
        return;
    }
    struct doomed *d = nn__host_alloc(sizeof *d);
    if (!d) return;
    *d = (struct doomed){s->kind, live, c->doomed};
    c->doomed = d;
}

static void doomed_destroy_all(struct nn__cache *c)
{
    while (c->doomed) {
        struct doomed *d = c->doomed;
        c->doomed = d->next;
        d->kind->destroy(d->live);
        nn__host_free(d);
    }
}

static void entry_free(struct entry *e)
{
    if (e->live) live_destroy(e->slot, e->live);
    nn__host_free(e);
}

static void table_free_all(struct table *t)
{
    struct entry *e = t->list.next;
    while (e != &t->list) {
        struct entry *next = e->next;
        entry_free(e);
        e = next;
    }
    nn__host_free(t->buckets);
    table_init(t);
}

static size_t round8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

/* One allocation holding the entry, a copy of key and record, and the blob. */
static struct entry *entry_new(const struct slot *s, const void *key, uint64_t hash,
                               const void *record, const char *blob, uint32_t blob_len)
{
    const struct nn__cache_kind *k = s->kind;
    size_t at_key = round8(sizeof(struct entry)), at_rec = at_key + round8(k->key_size),
           at_blob = at_rec + round8(k->record_size);
    unsigned char *m = nn__host_alloc(at_blob + blob_len + 1);
    if (!m) return NULL;
    struct entry *e = (struct entry *)m;
    memset(e, 0, sizeof *e);
    e->slot = s;
    e->hash = hash;
    e->key = m + at_key;
    e->record = m + at_rec;
    e->blob = (char *)m + at_blob;
    e->blob_len = blob_len;
    memcpy(e->key, key, k->key_size);
    memcpy(e->record, record, k->record_size);
    if (blob_len) memcpy(e->blob, blob, blob_len);
    e->blob[blob_len] = '\0';
    if (k->bind_blob) k->bind_blob(e->record, e->blob, blob_len);
    return e;
}

static void view_of(const struct entry *e, struct nn__cache_view *v)
{
    if (!v) return;
    v->record = e ? e->record : NULL;
    v->blob = e ? e->blob : NULL;
    v->blob_len = e ? e->blob_len : 0;
}

/* ---------------------------------------------------------------------------------------------
 * The cache
 */

static const struct slot *slot_of(const struct nn__cache *c, uint32_t kind)
{
    if (kind < 1 || kind > NN__CACHE_KIND_ID_MAX || !c->slots[kind].kind) return NULL;
    return &c->slots[kind];
}

const struct nn__cache_kind *nn__cache_kind_of(const struct nn__cache *c, uint32_t id)
{
    const struct slot *s = slot_of(c, id);
    return s ? s->kind : NULL;
}

nn_status nn__cache_create(struct nn_ctx *ctx, const struct nn__cache_kind *const *table, int n,
                           int capacity, struct nn__cache **out)
{
    *out = NULL;
    if (capacity < 1)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "plan cache: capacity must be >= 1, got %d",
                        capacity);
    if (n < 0 || (n && !table))
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "plan cache: no table for %d kinds", n);
    for (int i = 0; i < n; i++) {
        const char *bad = table[i] ? kind_invalid(table[i]) : "is NULL";
        for (int j = 0; !bad && j < i; j++)
            if (table[j] && table[j]->id == table[i]->id) bad = "repeats the id of an earlier kind";
        if (bad)
            return NN__FAIL(ctx, NN_E_INVALID_ARG, "plan cache: kind %d (%s) %s", i,
                            table[i] && table[i]->name ? table[i]->name : "?", bad);
    }
    struct nn__cache *c = nn__host_calloc(1, sizeof *c);
    if (!c) return NN__FAIL(ctx, NN_E_OOM_HOST, "plan cache: out of host memory");
    c->capacity = capacity;
    c->table = table;
    c->nkinds = n;
    table_init(&c->live);
    table_init(&c->known);
    for (int i = 0; i < n; i++) {
        c->slots[table[i]->id].cache = c;
        if (!slot_init(&c->slots[table[i]->id], table[i])) {
            nn__cache_destroy(c);
            return NN__FAIL(ctx, NN_E_OOM_HOST, "plan cache: out of host memory");
        }
    }
    *out = c;
    return NN_OK;
}

nn_status nn__cache_create_like(struct nn_ctx *ctx, const struct nn__cache *c, int capacity,
                                struct nn__cache **out)
{
    return nn__cache_create(ctx, c->table, c->nkinds, capacity, out);
}

static void leave_shared(struct nn__cache *c);

void nn__cache_destroy(struct nn__cache *c)
{
    if (!c) return;
    leave_shared(c);
    c->held = 0;
    table_free_all(&c->live);
    table_free_all(&c->known);
    doomed_destroy_all(c);
    for (int i = 0; i <= NN__CACHE_KIND_ID_MAX; i++)
        nn__host_free(c->slots[i].runs);
    nn__host_free(c);
}

void nn__cache_hold(struct nn__cache *c)
{
    c->held++;
}

void nn__cache_release(struct nn__cache *c)
{
    if (c->held > 0 && --c->held == 0) doomed_destroy_all(c);
}

void nn__cache_clear(struct nn__cache *c)
{
    table_free_all(&c->live);
    table_free_all(&c->known);
}

void *nn__cache_lookup(struct nn__cache *c, uint32_t kind, const void *key,
                       struct nn__cache_view *view)
{
    const struct slot *s = slot_of(c, kind);
    struct entry *e = s ? table_find(&c->live, s, key, runs_hash(s, key)) : NULL;
    view_of(e, view);
    if (!e) {
        c->stats.misses++;
        return NULL;
    }
    c->stats.hits++;
    if (c->live.list.next != e) { /* a loop over one shape hits the newest entry */
        list_unlink(e);
        list_push_front(&c->live.list, e);
    }
    return e->live;
}

static struct entry *find(const struct nn__cache *c, const struct table *t, uint32_t kind,
                          const void *key)
{
    const struct slot *s = slot_of(c, kind);
    return s ? table_find(t, s, key, runs_hash(s, key)) : NULL;
}

int nn__cache_is_live(const struct nn__cache *c, uint32_t kind, const void *key)
{
    return find(c, &c->live, kind, key) != NULL;
}

void *nn__cache_live_record(struct nn__cache *c, uint32_t kind, const void *key)
{
    struct entry *e = find(c, &c->live, kind, key);
    return e ? e->record : NULL;
}

/* ---------------------------------------------------------------------------------------------
 * One tuning per device
 */

/* The store's slot of s's kind, if the store has that very kind. */
static const struct slot *shared_slot(const struct nn__cache_shared *sh, const struct slot *s)
{
    const struct slot *r = slot_of(sh->records, s->kind->id);
    return r && r->kind == s->kind ? r : NULL;
}

/* Copy the record of a cache's entry e into the store, replacing the key's record there, as the
 * most recently used. Best effort: without host memory the store just does not learn it. */
static void publish(struct nn__cache *c, const struct entry *e)
{
    struct nn__cache_shared *sh = c->shared;
    if (!sh || !persisted(e->slot->kind)) return;
    pthread_mutex_lock(&sh->mu);
    struct table *t = &sh->records->known;
    const struct slot *s = shared_slot(sh, e->slot);
    struct entry *n = s ? entry_new(s, e->key, e->hash, e->record, e->blob, e->blob_len) : NULL;
    if (n && table_reserve(t, 1)) {
        struct entry *old = table_find(t, s, e->key, e->hash);
        if (old) {
            table_remove(t, old);
            entry_free(old);
        }
        table_add(t, n);
        while (t->count > sh->bound) {
            struct entry *lru = t->list.prev;
            table_remove(t, lru);
            entry_free(lru);
        }
    } else {
        nn__host_free(n);
    }
    pthread_mutex_unlock(&sh->mu);
}

static void unpublish(struct nn__cache *c, const struct slot *s, const void *key, uint64_t hash)
{
    struct nn__cache_shared *sh = c->shared;
    if (!sh) return;
    pthread_mutex_lock(&sh->mu);
    const struct slot *r = shared_slot(sh, s);
    struct entry *e = r ? table_find(&sh->records->known, r, key, hash) : NULL;
    if (e) {
        table_remove(&sh->records->known, e);
        entry_free(e);
    }
    pthread_mutex_unlock(&sh->mu);
}

/* The store's record of key copied into c's known records (the store's becomes the most
 * recently used), or NULL: none, the key is live in c, c is full, or no host memory. */
static struct entry *fetch_shared(struct nn__cache *c, const struct slot *s, const void *key,
                                  uint64_t hash)
{
    struct nn__cache_shared *sh = c->shared;
    if (table_find(&c->live, s, key, hash) || c->known.count >= NN__CACHE_KNOWN_MAX) return NULL;
    struct entry *got = NULL;
    pthread_mutex_lock(&sh->mu);
    struct table *t = &sh->records->known;
    const struct slot *r = shared_slot(sh, s);
    struct entry *e = r ? table_find(t, r, key, hash) : NULL;
    if (e) {
        got = entry_new(s, e->key, hash, e->record, e->blob, e->blob_len);
        if (got && table_reserve(&c->known, 1)) {
            list_unlink(e);
            list_push_front(&t->list, e);
            table_add(&c->known, got);
            c->stats.shared_records++;
        } else {
            nn__host_free(got);
            got = NULL;
        }
    }
    pthread_mutex_unlock(&sh->mu);
    return got;
}

nn_status nn__cache_share_device(struct nn_ctx *ctx, struct nn__cache *c, int device)
{
    if (c->shared)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "plan cache: already shares device %d's tuning",
                        c->shared->device);
    nn_status st = NN_OK;
    pthread_mutex_lock(&registry_mu);
    struct nn__cache_shared *sh = registry;
    while (sh && sh->device != device)
        sh = sh->next;
    if (!sh) {
        sh = nn__host_calloc(1, sizeof *sh);
        if (!sh)
            st = NN__FAIL(ctx, NN_E_OOM_HOST, "plan cache: out of host memory");
        else if ((st = nn__cache_create(ctx, c->table, c->nkinds, 1, &sh->records)) != NN_OK) {
            nn__host_free(sh);
            sh = NULL;
        } else {
            pthread_mutex_init(&sh->mu, NULL);
            sh->device = device;
            sh->bound = NN__CACHE_SHARED_MIN;
            sh->next = registry;
            registry = sh;
        }
    }
    if (sh) {
        sh->refs++;
        pthread_mutex_lock(&sh->mu);
        if ((size_t)c->capacity > sh->bound) sh->bound = (size_t)c->capacity;
        pthread_mutex_unlock(&sh->mu);
        c->shared = sh;
    }
    pthread_mutex_unlock(&registry_mu);
    return st;
}

static void leave_shared(struct nn__cache *c)
{
    struct nn__cache_shared *sh = c->shared;
    if (!sh) return;
    c->shared = NULL;
    pthread_mutex_lock(&registry_mu);
    int last = --sh->refs == 0;
    if (last) {
        struct nn__cache_shared **p = &registry;
        while (*p != sh)
            p = &(*p)->next;
        *p = sh->next;
    }
    pthread_mutex_unlock(&registry_mu);
    if (!last) return;
    nn__cache_destroy(sh->records);
    pthread_mutex_destroy(&sh->mu);
    nn__host_free(sh);
}

void nn__cache_clear_shared(struct nn__cache *c)
{
    struct nn__cache_shared *sh = c->shared;
    if (!sh) return;
    pthread_mutex_lock(&sh->mu);
    table_free_all(&sh->records->known);
    pthread_mutex_unlock(&sh->mu);
}

static void table_abandon(struct table *t)
{
    struct entry *e = t->list.next;
    while (e != &t->list) {
        struct entry *next = e->next;
        nn__host_free(e);
        e = next;
    }
    nn__host_free(t->buckets);
}

void nn__cache_abandon(struct nn__cache *c)
{
    if (!c) return;
    table_abandon(&c->live);
    table_abandon(&c->known);
    for (int i = 0; i <= NN__CACHE_KIND_ID_MAX; i++)
        nn__host_free(c->slots[i].runs);
    nn__host_free(c);
}

/* A copy of e into dst's known records unless dst has its key; *full once dst can take no more. */
static nn_status add_if_missing(struct nn_ctx *ctx, struct nn__cache *dst, const struct entry *e,
                                int *full)
{
    const struct slot *s = slot_of(dst, e->slot->kind->id);
    if (*full || !s || s->kind != e->slot->kind || !persisted(s->kind) ||
        table_find(&dst->known, s, e->key, e->hash) || table_find(&dst->live, s, e->key, e->hash))
        return NN_OK;
    if (dst->known.count >= NN__CACHE_KNOWN_MAX) {
        *full = 1;
        return NN_OK;
    }
    struct entry *n = entry_new(s, e->key, e->hash, e->record, e->blob, e->blob_len);
    if (!n || !table_reserve(&dst->known, 1)) {
        nn__host_free(n);
        return NN__FAIL(ctx, NN_E_OOM_HOST, "plan cache: out of host memory");
    }
    table_add(&dst->known, n);
    return NN_OK;
}

nn_status nn__cache_add_missing(struct nn_ctx *ctx, struct nn__cache *dst,
                                const struct nn__cache *src)
{
    int full = 0;
    nn_status st = NN_OK;
    for (const struct entry *e = src->live.list.next; st == NN_OK && e != &src->live.list;
         e = e->next)
        st = add_if_missing(ctx, dst, e, &full);
    for (const struct entry *e = src->known.list.prev; st == NN_OK && e != &src->known.list;
         e = e->prev)
        st = add_if_missing(ctx, dst, e, &full);
    struct nn__cache_shared *sh = src->shared;
    if (st != NN_OK || !sh) return st;
    pthread_mutex_lock(&sh->mu);
    const struct table *t = &sh->records->known;
    for (const struct entry *e = t->list.next; st == NN_OK && e != &t->list; e = e->next)
        st = add_if_missing(ctx, dst, e, &full);
    pthread_mutex_unlock(&sh->mu);
    return st;
}

/* An evicted record stays useful: it is kept as a known record (up to the bound), unless its kind
 * has nothing to rebuild from. */
static void evict_lru(struct nn__cache *c)
{
    struct entry *e = c->live.list.prev;
    table_remove(&c->live, e);
    live_destroy(e->slot, e->live);
    e->live = NULL;
    c->stats.evictions++;
    if (persisted(e->slot->kind) && c->known.count < NN__CACHE_KNOWN_MAX)
        table_add(&c->known, e);
    else
        entry_free(e);
}

/* The checks shared by insertion, replacement and known records: NN_OK or the failure, with
 * what ("plan cache insert") in its message. */
static nn_status check_entry(struct nn_ctx *ctx, const struct slot *s, uint32_t kind,
                             const void *record, uint32_t blob_len, const char *what)
{
    if (!s) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: kind %u is not in the table", what, kind);
    const struct nn__cache_kind *k = s->kind;
    if (blob_len > k->blob_max)
        return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: %s: blob of %u bytes, at most %u", what,
                        k->name, blob_len, k->blob_max);
    const char *bad = k->record_invalid ? k->record_invalid(record, blob_len) : NULL;
    if (bad) return NN__FAIL(ctx, NN_E_INVALID_ARG, "%s: %s record: %s", what, k->name, bad);
    return NN_OK;
}

nn_status nn__cache_insert(struct nn_ctx *ctx, struct nn__cache *c, uint32_t kind, const void *key,
                           const void *record, const char *blob, uint32_t blob_len, void *live)
{
    if (!key || !record || !live || (blob_len && !blob))
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "plan cache insert: key, record, live object (and a blob of nonzero "
                        "length) must not be NULL");
    const struct slot *s = slot_of(c, kind);
    NN__TRY(check_entry(ctx, s, kind, record, blob_len, "plan cache insert"));
    uint64_t hash = runs_hash(s, key);
    struct entry *old = table_find(&c->live, s, key, hash);
    int evicting = !old && c->live.count >= (size_t)c->capacity;
    struct entry *e = entry_new(s, key, hash, record, blob, blob_len);
    if (!e || !table_reserve(&c->live, 1) || (evicting && !table_reserve(&c->known, 1))) {
        nn__host_free(e);
        return NN__FAIL(ctx, NN_E_OOM_HOST, "plan cache insert: out of host memory");
    }
    if (old) {
        table_remove(&c->live, old);
        entry_free(old);
    } else if (evicting) {
        evict_lru(c);
    }
    struct entry *known = table_find(&c->known, s, key, hash);
    if (known) {
        table_remove(&c->known, known);
        entry_free(known);
    }
    e->live = live;
    table_add(&c->live, e);
    publish(c, e);
    return NN_OK;
}

/* The new entry takes old's place in its table and LRU position. */
static void entry_swap(struct table *t, struct entry *old, struct entry *e)
{
    struct entry **p = &t->buckets[old->hash & (t->nbuckets - 1)];
    while (*p != old)
        p = &(*p)->chain;
    *p = e;
    e->chain = old->chain;
    e->prev = old->prev;
    e->next = old->next;
    e->prev->next = e;
    e->next->prev = e;
}

nn_status nn__cache_replace_live(struct nn_ctx *ctx, struct nn__cache *c, uint32_t kind,
                                 const void *key, void *live, const void *record, const char *blob,
                                 uint32_t blob_len)
{
    struct entry *e = find(c, &c->live, kind, key);
    if (!e) return NN__FAIL(ctx, NN_E_INVALID_ARG, "plan cache replace: no live entry to replace");
    if (record) {
        NN__TRY(check_entry(ctx, e->slot, kind, record, blob_len, "plan cache replace"));
        struct entry *n = entry_new(e->slot, key, e->hash, record, blob, blob_len);
        if (!n) return NN__FAIL(ctx, NN_E_OOM_HOST, "plan cache replace: out of host memory");
        n->live = e->live;
        entry_swap(&c->live, e, n);
        e->live = NULL;
        entry_free(e);
        e = n;
        publish(c, e);
    }
    if (live && e->live != live) {
        live_destroy(e->slot, e->live);
        e->live = live;
    }
    return NN_OK;
}

const void *nn__cache_lookup_known(const struct nn__cache *c, uint32_t kind, const void *key,
                                   struct nn__cache_view *view)
{
    const struct slot *s = slot_of(c, kind);
    struct entry *e = NULL;
    if (s) {
        uint64_t hash = runs_hash(s, key);
        e = table_find(&c->known, s, key, hash);
        /* The copy goes into the cache's own table: the pointer handed out stays valid whatever
         * other contexts do to the store. */
        if (!e && c->shared) e = fetch_shared((struct nn__cache *)c, s, key, hash);
    }
    view_of(e, view);
    return e ? e->record : NULL;
}

int nn__cache_drop_known(struct nn__cache *c, uint32_t kind, const void *key)
{
    struct entry *e = find(c, &c->known, kind, key);
    if (e) unpublish(c, e->slot, key, e->hash);
    if (!e) return 0;
    table_remove(&c->known, e);
    entry_free(e);
    c->stats.records_dropped++;
    return 1;
}

nn_status nn__cache_add_known(struct nn_ctx *ctx, struct nn__cache *c, uint32_t kind,
                              const void *key, const void *record, const char *blob,
                              uint32_t blob_len)
{
    const struct slot *s = slot_of(c, kind);
    NN__TRY(check_entry(ctx, s, kind, record, blob_len, "plan cache"));
    if (!persisted(s->kind))
        return NN__FAIL(ctx, NN_E_INVALID_ARG,
                        "plan cache: kind %u (%s) is not persisted: it has no known records", kind,
                        s->kind->name);
    uint64_t hash = runs_hash(s, key);
    struct entry *old = table_find(&c->known, s, key, hash);
    if (!old && c->known.count >= NN__CACHE_KNOWN_MAX)
        return NN__FAIL(ctx, NN_E_OVERFLOW, "plan cache: more than %d known records",
                        NN__CACHE_KNOWN_MAX);
    struct entry *e = entry_new(s, key, hash, record, blob, blob_len);
    if (!e || !table_reserve(&c->known, 1)) {
        nn__host_free(e);
        return NN__FAIL(ctx, NN_E_OOM_HOST, "plan cache: out of host memory");
    }
    if (old) {
        table_remove(&c->known, old);
        entry_free(old);
    }
    table_add(&c->known, e);
    return NN_OK;
}

nn_status nn__cache_take_known(struct nn_ctx *ctx, struct nn__cache *dst, struct nn__cache *src)
{
    if (!table_reserve(&dst->known, src->known.count))
        return NN__FAIL(ctx, NN_E_OOM_HOST, "plan cache: out of host memory");
    /* Oldest first, so the insertion order (and thus the save order) is kept. */
    while (src->known.count) {
        struct entry *e = src->known.list.prev;
        table_remove(&src->known, e);
        dst->stats.records_loaded++;
        /* The entry moves to dst, so it must point at dst's slot of its kind. */
        const struct slot *s = slot_of(dst, e->slot->kind->id);
        if (!s || s->kind != e->slot->kind || table_find(&dst->live, s, e->key, e->hash)) {
            entry_free(e);
            continue;
        }
        e->slot = s;
        struct entry *old = table_find(&dst->known, s, e->key, e->hash);
        if (old) {
            table_remove(&dst->known, old);
            entry_free(old);
        } else if (dst->known.count >= NN__CACHE_KNOWN_MAX) {
            entry_free(e);
            continue;
        }
        table_add(&dst->known, e);
    }
    return NN_OK;
}

size_t nn__cache_size(const struct nn__cache *c)
{
    return c->live.count;
}

size_t nn__cache_known_count(const struct nn__cache *c)
{
    return c->known.count;
}

int nn__cache_capacity(const struct nn__cache *c)
{
    return c->capacity;
}

int nn__cache_visit(const struct nn__cache *c, nn__cache_visit_fn fn, void *arg)
{
    struct nn__cache_view v;
    for (const struct entry *e = c->live.list.next; e != &c->live.list; e = e->next) {
        if (!persisted(e->slot->kind)) continue;
        view_of(e, &v);
        int r = fn(arg, e->slot->kind, e->key, &v);
        if (r) return r;
    }
    /* Known keys are never live (insertion removes them), so nothing is visited twice. */
    for (const struct entry *e = c->known.list.prev; e != &c->known.list; e = e->prev) {
        view_of(e, &v);
        int r = fn(arg, e->slot->kind, e->key, &v);
        if (r) return r;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Statistics
 */

void nn__cache_count(struct nn__cache *c, enum nn__cache_event e)
{
    switch (e) {
    case NN__PC_HEURISTIC_QUERY: c->stats.heuristic_queries++; break;
    case NN__PC_PLAN_BUILT: c->stats.plans_built++; break;
    case NN__PC_REBUILT: c->stats.plans_rebuilt++; break;
    case NN__PC_QUICK: c->stats.quick_plans++; break;
    case NN__PC_BACKGROUND_BUILT: c->stats.background_builds++; break;
    case NN__PC_BACKGROUND_FAILED: c->stats.background_failures++; break;
    case NN__PC_PREBUILT: c->stats.plans_prebuilt++; break;
    }
}

void nn__cache_count_autotune(struct nn__cache *c, uint64_t ns)
{
    c->stats.autotune_runs++;
    c->stats.autotune_ns += ns;
}

void nn__cache_count_skipped(struct nn__cache *c, uint64_t n)
{
    c->stats.records_skipped += n;
}

void nn__cache_get_stats(const struct nn__cache *c, nn_plan_cache_stats *out)
{
    *out = c->stats;
    out->entries = c->live.count;
    out->known_records = c->known.count;
    struct nn__cache_shared *sh = c->shared;
    if (sh) {
        pthread_mutex_lock(&sh->mu);
        out->device_records = sh->records->known.count;
        pthread_mutex_unlock(&sh->mu);
    }
}
