/* One tuning per device (cache.h): caches of one device share their records, never their live
 * objects; the store is reference-counted, bounded, thread-safe, cleared with the cache, and a
 * save merges it and the file already there. CPU only: fake plans and fake devices. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nnprim/nnprim.h"

#include "conv/conv_plan_key.h"
#include "cudnn/cache.h"
#include "cudnn/plan_cache.h"
#include "cudnn/plan_file.h"
#include "plan_fixtures.h"

static int plan_token;

static struct nn__cache *shared_cache(int device, int capacity)
{
    struct nn__cache *c = NULL;
    cr_assert_eq(fx_cache_create(NULL, capacity, &c), NN_OK, "%s", nn_last_error()->message);
    cr_assert_eq(nn__cache_share_device(NULL, c, device), NN_OK, "%s", nn_last_error()->message);
    return c;
}

static void insert_seed(struct nn__cache *c, int seed)
{
    char json[64];
    struct nn__conv_key k = fx_key(seed);
    struct nn__plan_record r = fx_record(seed, json);
    cr_assert_eq(nn__plan_cache_insert(NULL, c, NN__CONV_KIND_ID, &k, &r, &plan_token), NN_OK, "%s",
                 nn_last_error()->message);
}

static const struct nn__plan_record *known_seed(const struct nn__cache *c, int seed)
{
    struct nn__conv_key k = fx_key(seed);
    return nn__plan_cache_lookup_known(c, NN__CONV_KIND_ID, &k);
}

static nn_plan_cache_stats stats_of(const struct nn__cache *c)
{
    nn_plan_cache_stats s;
    nn__cache_get_stats(c, &s);
    return s;
}

Test(cache_shared, a_record_tuned_in_one_cache_answers_the_other_caches_miss)
{
    struct nn__cache *a = shared_cache(0, 4), *b = shared_cache(0, 4);
    insert_seed(a, 1);
    cr_expect_eq(stats_of(b).device_records, 1);
    struct nn__conv_key k = fx_key(1);
    cr_expect_null(nn__plan_cache_lookup(b, NN__CONV_KIND_ID, &k, NULL), "live objects stay");
    char json[64];
    struct nn__plan_record want = fx_record(1, json);
    const struct nn__plan_record *got = known_seed(b, 1);
    cr_assert_not_null(got);
    cr_expect(fx_record_equal(got, &want));
    cr_expect_eq(got->json[got->json_len], '\0');
    nn_plan_cache_stats s = stats_of(b);
    cr_expect_eq(s.shared_records, 1);
    cr_expect_eq(s.known_records, 1, "the copy is b's own");
    /* b's copy outlives a and the store's record. */
    nn__cache_destroy(a);
    nn__cache_clear_shared(b);
    cr_expect_eq(stats_of(b).device_records, 0);
    cr_expect(fx_record_equal(known_seed(b, 1), &want));
    cr_expect_eq(stats_of(b).shared_records, 1, "found in b itself, not counted again");
    /* Once b goes live on it, the key is no known record of b and the store has it again. */
    insert_seed(b, 1);
    cr_expect_eq(stats_of(b).known_records, 0);
    cr_expect_eq(stats_of(b).device_records, 1);
    nn__cache_destroy(b);
}

Test(cache_shared, devices_and_unshared_caches_are_apart)
{
    struct nn__cache *a = shared_cache(0, 4), *b = shared_cache(1, 4), *alone = NULL;
    cr_assert_eq(fx_cache_create(NULL, 4, &alone), NN_OK);
    insert_seed(a, 1);
    insert_seed(alone, 2);
    cr_expect_null(known_seed(b, 1), "another device");
    cr_expect_null(known_seed(a, 2), "a cache that did not join publishes nothing");
    cr_expect_null(known_seed(alone, 1), "and fetches nothing");
    cr_expect_eq(stats_of(alone).device_records, 0);
    cr_expect_eq(nn__cache_share_device(NULL, a, 0), NN_E_INVALID_ARG);
    nn__cache_destroy(alone);
    nn__cache_destroy(b);
    nn__cache_destroy(a);
}

Test(cache_shared, the_last_cache_to_leave_frees_the_store)
{
    struct nn__cache *a = shared_cache(3, 4), *b = shared_cache(3, 4);
    insert_seed(a, 1);
    nn__cache_destroy(a);
    cr_expect_eq(stats_of(b).device_records, 1, "b keeps the store alive");
    nn__cache_destroy(b);
    struct nn__cache *c = shared_cache(3, 4);
    cr_expect_eq(stats_of(c).device_records, 0, "a new store");
    cr_expect_null(known_seed(c, 1));
    nn__cache_destroy(c);
}

Test(cache_shared, a_dropped_record_leaves_the_store_and_live_keys_fetch_nothing)
{
    struct nn__cache *a = shared_cache(0, 4), *b = shared_cache(0, 4);
    insert_seed(a, 1);
    insert_seed(a, 2);
    cr_assert_not_null(known_seed(b, 1));
    struct nn__conv_key k1 = fx_key(1);
    cr_expect_eq(nn__plan_cache_drop_known(b, NN__CONV_KIND_ID, &k1), 1);
    cr_expect_eq(stats_of(b).device_records, 1, "it would not build for a either");
    cr_expect_null(known_seed(b, 1));
    insert_seed(b, 3);
    insert_seed(a, 3);
    cr_expect_null(known_seed(b, 3), "a key live in b is not fetched as known");
    cr_expect_eq(stats_of(b).known_records, 0);
    nn__cache_destroy(a);
    nn__cache_destroy(b);
}

Test(cache_shared, the_store_keeps_the_most_recently_used_records_up_to_its_bound)
{
    /* Capacity 2 < NN__CACHE_SHARED_MIN: the bound is the minimum. */
    struct nn__cache *a = shared_cache(0, 2), *b = shared_cache(0, 2);
    int n = NN__CACHE_SHARED_MIN + 10;
    insert_seed(a, 1);
    for (int s = 2; s <= n; s++) {
        insert_seed(a, s);
        if (s == NN__CACHE_SHARED_MIN) cr_assert_not_null(known_seed(b, 1), "fetching uses it");
    }
    cr_expect_eq(stats_of(b).device_records, NN__CACHE_SHARED_MIN);
    nn__cache_clear(b); /* what b fetched is b's own: ask the store again */
    cr_expect_not_null(known_seed(b, 1), "fetched recently, so it stayed");
    cr_expect_null(known_seed(b, 2), "seed 2 was the least recently used");
    cr_expect_not_null(known_seed(b, n));
    /* A larger capacity raises the bound. */
    struct nn__cache *big = shared_cache(0, NN__CACHE_SHARED_MIN + 50);
    for (int s = n + 1; s <= n + 40; s++)
        insert_seed(big, s);
    cr_expect_eq(stats_of(b).device_records, NN__CACHE_SHARED_MIN + 40);
    nn__cache_destroy(big);
    nn__cache_destroy(a);
    nn__cache_destroy(b);
}

/* Threads, each with its own cache of one device, insert and fetch at once. */
struct worker {
    int id;
    int found;
};

enum { THREADS = 4, PER_THREAD = 200 };

static void *hammer(void *arg)
{
    struct worker *w = arg;
    struct nn__cache *c = NULL;
    if (fx_cache_create(NULL, 64, &c) != NN_OK || nn__cache_share_device(NULL, c, 5) != NN_OK)
        return NULL;
    char json[64];
    for (int i = 0; i < PER_THREAD; i++) {
        int seed = 1000 * w->id + i;
        struct nn__conv_key k = fx_key(seed);
        struct nn__plan_record r = fx_record(seed, json);
        if (nn__plan_cache_insert(NULL, c, NN__CONV_KIND_ID, &k, &r, &plan_token) != NN_OK) break;
        /* Others' records, published or not yet. */
        struct nn__conv_key o = fx_key(1000 * ((w->id + 1) % THREADS) + i);
        const struct nn__plan_record *got = nn__plan_cache_lookup_known(c, NN__CONV_KIND_ID, &o);
        char oj[64];
        struct nn__plan_record want = fx_record(1000 * ((w->id + 1) % THREADS) + i, oj);
        if (got && fx_record_equal(got, &want)) w->found++;
    }
    nn__cache_destroy(c);
    return NULL;
}

Test(cache_shared, threads_publish_and_fetch_at_once)
{
    struct nn__cache *keep = shared_cache(5, 4096); /* the bound holds everything */
    pthread_t t[THREADS];
    struct worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i].id = i;
        w[i].found = 0;
        cr_assert_eq(pthread_create(&t[i], NULL, hammer, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    cr_expect_eq(stats_of(keep).device_records, THREADS * PER_THREAD);
    for (int i = 0; i < THREADS; i++)
        for (int s = 0; s < PER_THREAD; s += 37)
            cr_expect_not_null(known_seed(keep, 1000 * i + s), "thread %d seed %d", i, s);
    nn__cache_destroy(keep);
}

Test(cache_shared, add_missing_takes_the_first_record_of_each_key)
{
    struct nn__cache *a = shared_cache(0, 4), *b = shared_cache(0, 4), *m = NULL;
    insert_seed(a, 1);
    char json[64];
    struct nn__conv_key k1 = fx_key(1), k2 = fx_key(2);
    struct nn__plan_record mine = fx_record(1, json);
    mine.time_us = 99;
    cr_assert_eq(nn__plan_cache_add_known(NULL, b, NN__CONV_KIND_ID, &k1, &mine), NN_OK);
    struct nn__plan_record two = fx_record(2, json);
    cr_assert_eq(nn__plan_cache_add_known(NULL, b, NN__CONV_KIND_ID, &k2, &two), NN_OK);
    cr_assert_eq(fx_cache_create(NULL, 1, &m), NN_OK);
    cr_assert_eq(nn__cache_add_missing(NULL, m, b), NN_OK);
    cr_expect_eq(nn__cache_known_count(m), 2, "b's two records; the store's seed 1 is b's key");
    cr_expect_eq(nn__plan_cache_lookup_known(m, NN__CONV_KIND_ID, &k1)->time_us, 99);
    cr_expect_eq(stats_of(m).shared_records, 0, "m shares nothing");
    nn__cache_destroy(m);
    nn__cache_destroy(a);
    nn__cache_destroy(b);
}

/* ---------------------------------------------------------------------------------------------
 * Merging saves
 */

static void temp_path(char *dir, size_t dcap, char *path, size_t pcap)
{
    snprintf(dir, dcap, "/tmp/nnprim-shared-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, pcap, "%s/plans", dir);
}

static void remove_all(const char *dir, const char *path)
{
    char lock[200];
    snprintf(lock, sizeof lock, "%s.lock", path);
    unlink(path);
    unlink(lock);
    rmdir(dir);
}

static struct nn__cache *load(const char *path, struct nn__gpu_id gpu)
{
    struct nn__cache *d = NULL;
    cr_assert_eq(fx_cache_create(NULL, 2, &d), NN_OK);
    cr_assert_eq(nn__plan_file_load(NULL, d, path, FX_CUDNN_VERSION, &gpu), NN_OK, "%s",
                 nn_last_error()->message);
    return d;
}

Test(cache_shared, a_save_keeps_the_files_records_and_ours_win)
{
    char dir[64], path[128];
    temp_path(dir, sizeof dir, path, sizeof path);
    struct nn__gpu_id gpu = fx_gpu();
    struct nn__cache *a = NULL, *b = NULL;
    cr_assert_eq(fx_cache_create(NULL, 8, &a), NN_OK);
    cr_assert_eq(fx_cache_create(NULL, 8, &b), NN_OK);
    for (int s = 1; s <= 4; s++)
        insert_seed(a, s);
    char json[64];
    for (int s = 3; s <= 6; s++) {
        struct nn__conv_key k = fx_key(s);
        struct nn__plan_record r = fx_record(s, json);
        r.time_us = 1000 + s; /* b's own measurement of the keys both have */
        cr_assert_eq(nn__plan_cache_add_known(NULL, b, NN__CONV_KIND_ID, &k, &r), NN_OK);
    }
    cr_assert_eq(nn__plan_file_save(NULL, a, path, FX_CUDNN_VERSION, &gpu), NN_OK);
    cr_assert_eq(nn__plan_file_save(NULL, b, path, FX_CUDNN_VERSION, &gpu), NN_OK, "%s",
                 nn_last_error()->message);
    struct nn__cache *d = load(path, gpu);
    cr_expect_eq(nn__cache_known_count(d), 6);
    for (int s = 1; s <= 6; s++) {
        const struct nn__plan_record *r = known_seed(d, s);
        cr_assert_not_null(r, "seed %d", s);
        struct nn__plan_record want = fx_record(s, json);
        if (s >= 3) want.time_us = 1000 + s;
        cr_expect(fx_record_equal(r, &want), "seed %d is %s's", s, s >= 3 ? "b" : "a");
    }
    nn__cache_destroy(d);
    nn__cache_destroy(a);
    nn__cache_destroy(b);
    remove_all(dir, path);
}

Test(cache_shared, a_save_carries_the_devices_shared_tuning)
{
    char dir[64], path[128];
    temp_path(dir, sizeof dir, path, sizeof path);
    struct nn__gpu_id gpu = fx_gpu();
    struct nn__cache *a = shared_cache(0, 4), *b = shared_cache(0, 4);
    insert_seed(a, 1);
    insert_seed(b, 2);
    cr_assert_eq(nn__plan_file_save(NULL, b, path, FX_CUDNN_VERSION, &gpu), NN_OK);
    struct nn__cache *d = load(path, gpu);
    cr_expect_eq(nn__cache_known_count(d), 2);
    cr_expect_not_null(known_seed(d, 1), "a's tuning, through the device's store");
    nn__cache_destroy(d);
    nn__cache_destroy(a);
    nn__cache_destroy(b);
    remove_all(dir, path);
}

Test(cache_shared, a_file_that_does_not_decode_is_reported_and_left_alone)
{
    char dir[64], path[128];
    temp_path(dir, sizeof dir, path, sizeof path);
    const char junk[] = "not a plan file, someone's data";
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fwrite(junk, 1, sizeof junk, f);
    fclose(f);
    struct nn__gpu_id gpu = fx_gpu();
    struct nn__cache *a = NULL;
    cr_assert_eq(fx_cache_create(NULL, 4, &a), NN_OK);
    insert_seed(a, 1);
    cr_expect_eq(nn__plan_file_save(NULL, a, path, FX_CUDNN_VERSION, &gpu), NN_E_FORMAT);
    const char *m = nn_last_error()->message;
    cr_expect(strstr(m, path) && strstr(m, "magic") && strstr(m, "left as it is"), "message: %s",
              m);
    char back[64] = "";
    f = fopen(path, "r");
    cr_assert_not_null(f);
    cr_expect_eq(fread(back, 1, sizeof back, f), sizeof junk);
    fclose(f);
    cr_expect_eq(memcmp(back, junk, sizeof junk), 0, "untouched");
    nn__cache_destroy(a);
    remove_all(dir, path);
}

/* mkstemp() reserves a name with an empty file: a save takes it as holding no records. */
Test(cache_shared, an_empty_file_is_replaced)
{
    char path[] = "/tmp/nnprim-shared-empty-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    struct nn__gpu_id gpu = fx_gpu();
    struct nn__cache *a = NULL;
    cr_assert_eq(fx_cache_create(NULL, 4, &a), NN_OK);
    insert_seed(a, 1);
    cr_expect_eq(nn__plan_file_save(NULL, a, path, FX_CUDNN_VERSION, &gpu), NN_OK, "%s",
                 nn_last_error()->message);
    struct nn__cache *d = load(path, gpu);
    cr_expect_eq(nn__cache_known_count(d), 1);
    nn__cache_destroy(d);
    nn__cache_destroy(a);
    char lock[64];
    snprintf(lock, sizeof lock, "%s.lock", path);
    unlink(path);
    unlink(lock);
}

Test(cache_shared, a_file_of_another_gpu_is_replaced)
{
    char dir[64], path[128];
    temp_path(dir, sizeof dir, path, sizeof path);
    struct nn__gpu_id gpu = fx_gpu(), other = fx_gpu();
    other.sm_count += 1;
    struct nn__cache *a = NULL, *b = NULL;
    cr_assert_eq(fx_cache_create(NULL, 4, &a), NN_OK);
    cr_assert_eq(fx_cache_create(NULL, 4, &b), NN_OK);
    insert_seed(a, 1);
    insert_seed(b, 2);
    cr_assert_eq(nn__plan_file_save(NULL, a, path, FX_CUDNN_VERSION, &other), NN_OK);
    cr_assert_eq(nn__plan_file_save(NULL, b, path, FX_CUDNN_VERSION, &gpu), NN_OK);
    struct nn__cache *d = load(path, gpu);
    cr_expect_eq(nn__cache_known_count(d), 1);
    cr_expect_not_null(known_seed(d, 2));
    nn__cache_destroy(d);
    nn__cache_destroy(a);
    nn__cache_destroy(b);
    remove_all(dir, path);
}

/* Two processes (fork, then exec of nothing: the children use only host code) save different
 * records to one file many times at once: the file ends with both sets. */
Test(cache_shared, two_processes_saving_at_once_keep_each_others_records)
{
    char dir[64], path[128];
    temp_path(dir, sizeof dir, path, sizeof path);
    enum { WRITERS = 2, ROUNDS = 40, PER = 6 };
    pid_t pids[WRITERS];
    for (int w = 0; w < WRITERS; w++) {
        pids[w] = fork();
        cr_assert_neq(pids[w], -1);
        if (pids[w] == 0) {
            struct nn__gpu_id gpu = fx_gpu();
            struct nn__cache *c = NULL;
            if (fx_cache_create(NULL, PER * ROUNDS, &c) != NN_OK) _exit(2);
            char json[64];
            for (int i = 0; i < ROUNDS; i++) {
                /* A new record each round, so every save has something the other lacks. */
                for (int s = 0; s < PER; s++) {
                    int seed = 10000 * (w + 1) + PER * i + s;
                    struct nn__conv_key k = fx_key(seed);
                    struct nn__plan_record r = fx_record(seed, json);
                    if (nn__plan_cache_add_known(NULL, c, NN__CONV_KIND_ID, &k, &r) != NN_OK)
                        _exit(3);
                }
                if (nn__plan_file_save(NULL, c, path, FX_CUDNN_VERSION, &gpu) != NN_OK) _exit(4);
            }
            nn__cache_destroy(c);
            _exit(0);
        }
    }
    for (int w = 0; w < WRITERS; w++) {
        int status;
        cr_assert_eq(waitpid(pids[w], &status, 0), pids[w]);
        cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer %d: status %d", w, status);
    }
    struct nn__cache *d = load(path, fx_gpu());
    cr_expect_eq(nn__cache_known_count(d), (size_t)(WRITERS * ROUNDS * PER));
    for (int w = 0; w < WRITERS; w++)
        for (int s = 0; s < ROUNDS * PER; s += 7)
            cr_expect_not_null(known_seed(d, 10000 * (w + 1) + s), "writer %d seed %d", w, s);
    nn__cache_destroy(d);
    remove_all(dir, path);
}
