#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

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
