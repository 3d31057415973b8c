/* Catalogue rows: the plan cache and its file (plan_cache.h). A reference context has no plans
 * (NN_E_UNSUPPORTED, the documented gate); on a cuDNN context every bad file reaches the parser. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalogue.h"

#define CALL(fname) static nn_status fname(struct cat *c)
#define TRY(expr)                                                                                  \
    do {                                                                                           \
        nn_status try_st = (expr);                                                                 \
        if (try_st != NN_OK) return try_st;                                                        \
    } while (0)

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "fixture: cannot write %s", path);
    cr_assert_eq(fwrite(data, 1, n, f), n, "fixture: write %s", path);
    cr_assert_eq(fclose(f), 0, "fixture: close %s", path);
}

/* A valid plan file of this context (after one convolution) in *buf, or the save's failure. */
static nn_status saved_file(struct cat *c, unsigned char **buf, size_t *len)
{
    cr_assert_eq(nn_conv_forward(c->ctx, &c->cp, &c->x, &c->w, &c->b, &c->y, NULL), NN_OK,
                 "fixture: %s", nn_last_error()->message);
    char path[128];
    cat_path(c, "plans", path, sizeof path);
    nn_status st = nn_plan_cache_save(c->ctx, path);
    if (st != NN_OK) return st;
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "the saved file");
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    *buf = cat_host_block(c, *len);
    cr_assert_eq(fread(*buf, 1, *len, f), *len);
    fclose(f);
    cr_assert_gt(*len, 16, "a plan file with a record");
    return NN_OK;
}

static uint64_t known_records(struct cat *c)
{
    nn_plan_cache_stats s;
    cr_assert_eq(nn_plan_cache_get_stats(c->ctx, &s), NN_OK);
    return s.known_records + s.entries;
}

/* Load each variant of a valid file; every one must give want, and leave the cache as it was. */
static nn_status load_variants(struct cat *c, int flip, nn_status want)
{
    unsigned char *buf;
    size_t len;
    TRY(saved_file(c, &buf, &len));
    char path[128];
    cat_path(c, "variant", path, sizeof path);
    unsigned char *v = cat_host_block(c, len);
    uint64_t before = known_records(c);
    nn_status st = want;
    for (size_t i = 0; i < len; i++) {
        memcpy(v, buf, len);
        if (flip) v[i] ^= (unsigned char)(1u << (i % 8));
        write_file(path, v, flip ? len : i);
        st = nn_plan_cache_load(c->ctx, path);
        cr_assert_eq(st, want, "%s at byte %zu of %zu: %s (%s)", flip ? "a bit flipped" : "cut", i,
                     len, nn_status_name(st), nn_last_error()->message);
        cr_assert_eq(known_records(c), before, "a failed load left the cache unchanged");
    }
    return st;
}

CALL(save_null_ctx)
{
    (void)c;
    return nn_plan_cache_save(NULL, "x");
}
CALL(save_null_path)
{
    return nn_plan_cache_save(c->ctx, NULL);
}
CALL(save_empty_path)
{
    return nn_plan_cache_save(c->ctx, "");
}
CALL(load_null_ctx)
{
    (void)c;
    return nn_plan_cache_load(NULL, "x");
}
CALL(load_null_path)
{
    return nn_plan_cache_load(c->ctx, NULL);
}
CALL(load_empty_path)
{
    return nn_plan_cache_load(c->ctx, "");
}
CALL(save_ok)
{
    unsigned char *buf;
    size_t len;
    return saved_file(c, &buf, &len);
}
CALL(load_own)
{
    unsigned char *buf;
    size_t len;
    char path[128];
    cat_path(c, "plans", path, sizeof path);
    if (c->gpu) TRY(saved_file(c, &buf, &len));
    return nn_plan_cache_load(c->ctx, path);
}
CALL(load_missing)
{
    char path[128];
    cat_path(c, "missing", path, sizeof path);
    return nn_plan_cache_load(c->ctx, path);
}
CALL(load_empty)
{
    char path[128];
    cat_path(c, "empty", path, sizeof path);
    write_file(path, "", 0);
    return nn_plan_cache_load(c->ctx, path);
}
CALL(load_dir)
{
    return nn_plan_cache_load(c->ctx, c->dir);
}
CALL(load_text)
{
    char path[128];
    cat_path(c, "text", path, sizeof path);
    write_file(path, "hello, plans\n", 13);
    return nn_plan_cache_load(c->ctx, path);
}
CALL(load_magic_only)
{
    char path[128];
    cat_path(c, "magic", path, sizeof path);
    write_file(path, "NNPLANC\n\x63\0\0\0", 12); /* format version 99 */
    return nn_plan_cache_load(c->ctx, path);
}
CALL(load_truncated)
{
    return c->gpu ? load_variants(c, 0, NN_E_FORMAT) : load_missing(c);
}
CALL(load_bitflip)
{
    return c->gpu ? load_variants(c, 1, NN_E_FORMAT) : load_missing(c);
}

static char *long_path(struct cat *c)
{
    size_t n = strlen(c->dir) + 5000;
    char *p = cat_host_block(c, n + 1);
    snprintf(p, n + 1, "%s/", c->dir);
    size_t k = strlen(p);
    memset(p + k, 'a', n - k); /* one 4990-character name: beyond NAME_MAX and PATH_MAX */
    p[n] = 0;
    return p;
}
CALL(save_long_path)
{
    return nn_plan_cache_save(c->ctx, long_path(c));
}
CALL(load_long_path)
{
    return nn_plan_cache_load(c->ctx, long_path(c));
}
CALL(save_unwritable)
{
    return nn_plan_cache_save(c->ctx, "/proc/nn-catalogue/plans");
}
CALL(save_no_dir)
{
    char path[160];
    cat_path(c, "no-such-dir/plans", path, sizeof path);
    return nn_plan_cache_save(c->ctx, path);
}
CALL(save_over_dir)
{
    char path[128];
    cat_path(c, "sub", path, sizeof path);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "mkdir %s", path);
    cr_assert_eq(system(cmd), 0, "fixture: mkdir");
    return nn_plan_cache_save(c->ctx, path);
}
/* Entries of c->dir ("." and ".." not counted). */
static int dir_entries(const struct cat *c)
{
    DIR *d = opendir(c->dir);
    cr_assert_not_null(d, "fixture: opendir %s", c->dir);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

/* A save to path, in a writable directory, whose lock file path.lock cannot be created (made so
 * by the caller): refused with the path and the lock file in the message, and nothing written
 * (no file at path, no temporary file beside it). */
static nn_status save_without_lock(struct cat *c, const char *path)
{
    int before = dir_entries(c);
    nn_status st = nn_plan_cache_save(c->ctx, path);
    struct stat sb;
    cr_assert_neq(stat(path, &sb), 0, "nothing was written at %s", path);
    cr_assert_eq(dir_entries(c), before, "no file was left in %s", c->dir);
    if (c->gpu && st != NN_OK)
        cr_assert(strstr(nn_last_error()->message, path) &&
                      strstr(nn_last_error()->message, "lock file"),
                  "the message names the path and its lock file: \"%s\"", nn_last_error()->message);
    return st;
}
CALL(save_lock_is_dir)
{
    char path[128], lock[160];
    cat_path(c, "plans", path, sizeof path);
    snprintf(lock, sizeof lock, "%s.lock", path);
    cr_assert_eq(mkdir(lock, 0755), 0, "fixture: mkdir %s", lock);
    return save_without_lock(c, path);
}
CALL(save_lock_dangling)
{
    char path[128], lock[160], target[160];
    cat_path(c, "plans", path, sizeof path);
    snprintf(lock, sizeof lock, "%s.lock", path);
    cat_path(c, "no-such-dir/plans.lock", target, sizeof target);
    cr_assert_eq(symlink(target, lock), 0, "fixture: symlink %s", lock);
    return save_without_lock(c, path);
}
CALL(save_over_text)
{
    char path[128];
    cat_path(c, "not-plans", path, sizeof path);
    write_file(path, "someone's data\n", 15);
    return nn_plan_cache_save(c->ctx, path); /* refused, the file left as it is */
}
CALL(save_over_empty)
{
    char path[128];
    cat_path(c, "empty-plans", path, sizeof path);
    write_file(path, "", 0);
    return nn_plan_cache_save(c->ctx, path);
}

CALL(clear_null)
{
    (void)c;
    return nn_plan_cache_clear(NULL);
}
CALL(clear_ok)
{
    return nn_plan_cache_clear(c->ctx);
}
CALL(wait_null)
{
    (void)c;
    return nn_plan_cache_wait(NULL);
}
CALL(wait_ok)
{
    return nn_plan_cache_wait(c->ctx);
}
CALL(stats_null_ctx)
{
    nn_plan_cache_stats s;
    (void)c;
    return nn_plan_cache_get_stats(NULL, &s);
}
CALL(stats_null_out)
{
    return nn_plan_cache_get_stats(c->ctx, NULL);
}
CALL(stats_ref_zero)
{
    nn_plan_cache_stats s;
    memset(&s, 0x5a, sizeof s);
    cr_assert_eq(nn_plan_cache_get_stats(c->ctx, &s), NN_OK);
    if (!c->gpu) cr_assert_eq(s.entries + s.hits + s.misses + s.reserved[0], 0, "zeros");
    return NN_OK;
}

#define E  NN_E_INVALID_ARG
#define U  NN_E_UNSUPPORTED
#define F  NN_E_FORMAT
#define IO NN_E_IO

static const struct cat_row rows[] = {
    ROW("save ctx NULL", "nn_plan_cache_save", "ctx", E, save_null_ctx),
    ROW("save path NULL", "nn_plan_cache_save", "path", E, save_null_path),
    ROW("save path empty", "nn_plan_cache_save", "path", E, save_empty_path),
    ROW("load ctx NULL", "nn_plan_cache_load", "ctx", E, load_null_ctx),
    ROW("load path NULL", "nn_plan_cache_load", "path", E, load_null_path),
    ROW("load path empty", "nn_plan_cache_load", "path", E, load_empty_path),
    ROW2("save (edge on cuDNN)", "nn_plan_cache_save", NULL, U, NN_OK, save_ok),
    ROW2("load its own file (edge on cuDNN)", "nn_plan_cache_load", NULL, U, NN_OK, load_own),
    ROW2("load a missing file", "nn_plan_cache_load", NULL, U, IO, load_missing),
    ROW2("load an empty file", "nn_plan_cache_load", NULL, U, F, load_empty),
    ROW2("load a directory", "nn_plan_cache_load", NULL, U, IO, load_dir),
    ROW2("load a text file", "nn_plan_cache_load", NULL, U, F, load_text),
    ROW2("load format version 99", "nn_plan_cache_load", NULL, U, F, load_magic_only),
    ROW2("load truncated at every byte", "nn_plan_cache_load", NULL, U, F, load_truncated),
    ROW2("load with a bit flipped in every byte", "nn_plan_cache_load", NULL, U, F, load_bitflip),
    ROW2("save to an over-long path", "nn_plan_cache_save", NULL, U, IO, save_long_path),
    ROW2("load an over-long path", "nn_plan_cache_load", NULL, U, IO, load_long_path),
    ROW2("save to an unwritable directory", "nn_plan_cache_save", NULL, U, IO, save_unwritable),
    ROW2("save into a missing directory", "nn_plan_cache_save", NULL, U, IO, save_no_dir),
    ROW2("save over a directory", "nn_plan_cache_save", NULL, U, IO, save_over_dir),
    ROW2("save when path.lock is a directory", "nn_plan_cache_save", NULL, U, IO, save_lock_is_dir),
    ROW2("save when path.lock links into a missing directory", "nn_plan_cache_save", NULL, U, IO,
         save_lock_dangling),
    ROW2("save over a file that is no plan file", "nn_plan_cache_save", NULL, U, F, save_over_text),
    ROW2("save over an empty file (edge on cuDNN)", "nn_plan_cache_save", NULL, U, NN_OK,
         save_over_empty),
    ROW("clear ctx NULL", "nn_plan_cache_clear", "ctx", E, clear_null),
    ROW("clear (edge)", "nn_plan_cache_clear", NULL, NN_OK, clear_ok),
    ROW("wait ctx NULL", "nn_plan_cache_wait", "ctx", E, wait_null),
    ROW("wait (edge)", "nn_plan_cache_wait", NULL, NN_OK, wait_ok),
    ROW("get_stats ctx NULL", "nn_plan_cache_get_stats", "ctx", E, stats_null_ctx),
    ROW("get_stats stats NULL", "nn_plan_cache_get_stats", "stats", E, stats_null_out),
    ROW("get_stats zeros on a reference context (edge)", "nn_plan_cache_get_stats", NULL, NN_OK,
        stats_ref_zero),
};

CAT_SUBJECT(plan, rows)
