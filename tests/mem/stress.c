#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "mem/mem_pool.h"
#include "stress.h"

#define SLOTS 32
#define MiB   ((size_t)1 << 20)

struct worker {
    int device, index, rounds;
    nn_mem_stream *own;
    pthread_mutex_t *lock; /* guards *mailbox, shared with the previous thread */
    void **mailbox;
    int errors;
};

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int tagged(const void *p, size_t size, int tag)
{
    const unsigned char *c = p;
    return c[0] == (unsigned char)tag && c[size - 1] == (unsigned char)tag;
}

static void *work(void *arg)
{
    struct worker *w = arg;
    void *slot[SLOTS] = {0};
    size_t size[SLOTS] = {0};
    uint64_t seed = 0x9E3779B97F4A7C15ull * (uint64_t)(w->index + 1);
    int host = w->device == NN_MEM_HOST;
    for (int r = 0; r < w->rounds; r++) {
        int k = (int)(rng(&seed) % SLOTS);
        if (slot[k]) {
            if (host && !tagged(slot[k], size[k], w->index)) w->errors++;
            if (r % 5 == 0) {
                pthread_mutex_lock(w->lock);
                void *prev = *w->mailbox;
                *w->mailbox = slot[k];
                pthread_mutex_unlock(w->lock);
                if (prev && nn_mem_stream_free(w->own, prev) != NN_OK) w->errors++;
            } else if (nn_mem_stream_free(w->own, slot[k]) != NN_OK) {
                w->errors++;
            }
            slot[k] = NULL;
            continue;
        }
        uint64_t x = rng(&seed);
        size[k] = x % 8 == 0 ? (size_t)(x >> 40) % (12 * MiB) + 1 : (size_t)(x >> 40) % 70000 + 1;
        if (nn_mem_stream_alloc(w->own, size[k], &slot[k]) != NN_OK) {
            fprintf(stderr, "thread %d: %s\n", w->index, nn_last_error()->message);
            w->errors++;
            continue;
        }
        if (host) {
            ((unsigned char *)slot[k])[0] = (unsigned char)w->index;
            ((unsigned char *)slot[k])[size[k] - 1] = (unsigned char)w->index;
        }
    }
    for (int k = 0; k < SLOTS; k++)
        if (slot[k] && nn_mem_stream_free(w->own, slot[k]) != NN_OK) w->errors++;
    return NULL;
}

int mem_stress_run(int device, nn_mem_stream **streams, int threads, int rounds)
{
    enum { MAX = 64 };
    if (threads < 1 || threads > MAX) return 1;
    struct worker w[MAX];
    pthread_t th[MAX];
    pthread_mutex_t locks[MAX];
    void *mail[MAX] = {0};
    int errors = 0;
    for (int i = 0; i < threads; i++)
        pthread_mutex_init(&locks[i], NULL);
    for (int i = 0; i < threads; i++) {
        int next = (i + 1) % threads;
        w[i] = (struct worker){device, i, rounds, streams[i], &locks[next], &mail[next], 0};
        if (pthread_create(&th[i], NULL, work, &w[i]) != 0) return errors + 1;
    }
    for (int i = 0; i < threads; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < threads; i++) {
        errors += w[i].errors;
        if (mail[i] && nn_mem_stream_free(streams[i], mail[i]) != NN_OK) errors++;
        pthread_mutex_destroy(&locks[i]);
    }
    return errors;
}

/* ---- the host pool under contention: pending work, trims and readers while threads allocate */

struct churner {
    int index, rounds;
    nn_mem_stream *own, **peer; /* peer: the next thread's stream, for cross-stream frees */
    int errors;
};

/* Allocate and free on its stream and the next thread's, with work left pending on its stream
 * for a while (the blocks freed meanwhile wait for an event), then a clean end. */
static void *churn(void *arg)
{
    struct churner *c = arg;
    struct nn__hstream *hs = nn__mem_stream_host(c->own);
    void *slot[SLOTS] = {0};
    uint64_t seed = 0xD1B54A32D192ED03ull * (uint64_t)(c->index + 1);
    for (int r = 0; r < c->rounds; r++) {
        if (r % 64 == 0) nn__hstream_busy(hs);
        if (r % 64 == 40) nn__hstream_sync(hs);
        int k = (int)(rng(&seed) % SLOTS);
        if (slot[k]) {
            /* One free in four goes through the peer's stream: a cross-stream free. */
            nn_mem_stream *via = r % 4 == 0 ? *c->peer : c->own;
            if (nn_mem_stream_free(via, slot[k]) != NN_OK) c->errors++;
            slot[k] = NULL;
        } else if (nn_mem_stream_alloc(c->own, (size_t)(rng(&seed) >> 40) % 300000 + 1, &slot[k]) !=
                   NN_OK) {
            fprintf(stderr, "churn %d: %s\n", c->index, nn_last_error()->message);
            c->errors++;
        }
    }
    nn__hstream_sync(hs);
    for (int k = 0; k < SLOTS; k++)
        if (slot[k] && nn_mem_stream_free(c->own, slot[k]) != NN_OK) c->errors++;
    return NULL;
}

struct reader {
    atomic_int *stop;
    long passes;
    int errors;
};

/* Everything a monitoring thread may call while others allocate: statistics, peak reset, the
 * event log, trims (which release idle segments under the workers), and a short-lived stream
 * of its own that leaves with work pending. */
static void *read_pool(void *arg)
{
    struct reader *rd = arg;
    char text[1024];
    nn_mem_event ev[64];
    while (!atomic_load(rd->stop)) {
        nn_mem_stats s;
        size_t n, released;
        if (nn_mem_get_stats(NN_MEM_HOST, &s) != NN_OK ||
            nn_mem_stats_format(&s, text, sizeof text) != NN_OK ||
            s.allocated_bytes > s.reserved_bytes)
            rd->errors++;
        if (nn_mem_reset_peak_stats(NN_MEM_HOST) != NN_OK) rd->errors++;
        if (nn_mem_log_enable(NN_MEM_HOST, rd->passes % 2 == 0) != NN_OK ||
            nn_mem_log_read(NN_MEM_HOST, ev, 64, &n) != NN_OK || n > 64)
            rd->errors++;
        if (rd->passes % 4 == 0 && nn_mem_trim(NN_MEM_HOST, &released) != NN_OK) rd->errors++;
        nn_mem_stream *tmp;
        void *p = NULL;
        if (nn_mem_stream_open(NN_MEM_HOST, NULL, &tmp) != NN_OK) {
            rd->errors++;
        } else {
            if (nn_mem_stream_alloc(tmp, 4096, &p) != NN_OK) rd->errors++;
            nn__hstream_busy(nn__mem_stream_host(tmp));
            if (p && nn_mem_stream_free(tmp, p) != NN_OK) rd->errors++;
            nn_mem_stream_close(tmp); /* synchronises the stream, then shares its blocks */
        }
        rd->passes++;
    }
    return NULL;
}

int mem_contention_run(int threads, int rounds)
{
    enum { MAX = 64 };
    if (threads < 2 || threads > MAX) return 1;
    nn_mem_stream *s[MAX];
    struct churner c[MAX];
    pthread_t th[MAX], rth;
    atomic_int stop = 0;
    struct reader rd = {&stop, 0, 0};
    int errors = 0, started = 0;
    for (int i = 0; i < threads; i++)
        if (nn_mem_stream_open(NN_MEM_HOST, NULL, &s[i]) != NN_OK) return 1 + i;
    int reading = pthread_create(&rth, NULL, read_pool, &rd) == 0;
    errors += !reading;
    for (int i = 0; i < threads; i++) {
        c[i] = (struct churner){i, rounds, s[i], &s[(i + 1) % threads], 0};
        if (pthread_create(&th[i], NULL, churn, &c[i]) != 0) {
            errors++;
            break;
        }
        started++;
    }
    for (int i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        errors += c[i].errors;
    }
    atomic_store(&stop, 1);
    if (reading) pthread_join(rth, NULL);
    errors += rd.errors;
    for (int i = 0; i < threads; i++)
        nn_mem_stream_close(s[i]);
    return errors;
}
