#include <stdint.h>

#include "core/alloc.h"
#include "core/ptrset.h"

static char gone_marker;
#define NN__PTRSET_GONE ((void *)&gone_marker)

static size_t slot_of(const void *p, size_t cap)
{
    uint64_t h = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 17) & (cap - 1);
}

static void insert_slot(void **slots, size_t cap, void *p)
{
    size_t i = slot_of(p, cap);
    while (slots[i] && slots[i] != NN__PTRSET_GONE)
        i = (i + 1) & (cap - 1);
    slots[i] = p;
}

/* Keep the table at most half used (deleted slots count as used until a rebuild). */
static int grow(struct nn__ptrset *s)
{
    size_t cap = s->cap ? s->cap : 64;
    while (cap < 4 * (s->live + 1))
        cap *= 2;
    void **slots = nn__host_calloc(cap, sizeof *slots);
    if (!slots) return -1;
    for (size_t i = 0; i < s->cap; i++)
        if (s->slots[i] && s->slots[i] != NN__PTRSET_GONE) insert_slot(slots, cap, s->slots[i]);
    nn__host_free(s->slots);
    s->slots = slots;
    s->cap = cap;
    s->used = s->live;
    return 0;
}

int nn__ptrset_add(struct nn__ptrset *s, void *p)
{
    pthread_mutex_lock(&s->lock);
    int rc = 0;
    if (2 * (s->used + 1) > s->cap) rc = grow(s);
    if (rc == 0) {
        insert_slot(s->slots, s->cap, p);
        s->used++;
        s->live++;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int nn__ptrset_remove(struct nn__ptrset *s, void *p)
{
    int found = 0;
    pthread_mutex_lock(&s->lock);
    if (s->cap) {
        size_t i = slot_of(p, s->cap);
        while (s->slots[i]) {
            if (s->slots[i] == p) {
                s->slots[i] = NN__PTRSET_GONE;
                s->live--;
                found = 1;
                break;
            }
            i = (i + 1) & (s->cap - 1);
        }
    }
    pthread_mutex_unlock(&s->lock);
    return found;
}

int nn__ptrset_contains(struct nn__ptrset *s, const void *p)
{
    int found = 0;
    pthread_mutex_lock(&s->lock);
    if (s->cap)
        for (size_t i = slot_of(p, s->cap); s->slots[i] && !found; i = (i + 1) & (s->cap - 1))
            found = s->slots[i] == p;
    pthread_mutex_unlock(&s->lock);
    return found;
}
