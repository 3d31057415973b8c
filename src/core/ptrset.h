/* A thread-safe set of pointers: which host blocks nnprim handed out, so that a free can tell
 * a foreign or already-freed pointer from its own. */
#ifndef NN_CORE_PTRSET_H
#define NN_CORE_PTRSET_H

#include <pthread.h>
#include <stddef.h>

struct nn__ptrset {
    pthread_mutex_t lock;
    void **slots; /* open addressing; NULL empty, NN__PTRSET_GONE deleted */
    size_t cap, used, live;
};

#define NN__PTRSET_INIT                                                                            \
    {                                                                                              \
        PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0                                                   \
    }

int nn__ptrset_add(struct nn__ptrset *s, void *p);            /* 0 ok, -1 out of memory */
int nn__ptrset_remove(struct nn__ptrset *s, void *p);         /* 1 removed, 0 absent */
int nn__ptrset_contains(struct nn__ptrset *s, const void *p); /* 1 present, 0 absent */

#endif
