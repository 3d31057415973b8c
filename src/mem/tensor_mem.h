/* Who owns a tensor's storage (tensor_mem.c), for the code that hands storage on (dlpack.c).
 * The arrow points one way: tensor_mem.c keeps the books and knows no exporter. */
#ifndef NN_MEM_TENSOR_MEM_H
#define NN_MEM_TENSOR_MEM_H

/* 1 when p is live host storage from nn_tensor_empty() with a reference context. */
int nn__host_tensor_owned(const void *p);

/* Storage handed to an owner outside nnprim (a DLPack capsule, whose deleter frees it):
 * nn_tensor_free() refuses it while it is linked, and a second export of it (from a copy of the
 * view) would free it under the first. The node lives in the owner's object, so tracking
 * allocates nothing. */
struct nn__storage_export {
    const void *data;
    struct nn__storage_export *prev, *next;
};

/* Link e (not linked) for data / unlink it (linked). Thread-safe. */
void nn__storage_export_link(struct nn__storage_export *e, const void *data);
void nn__storage_export_unlink(struct nn__storage_export *e);

/* 1 when p is the data of a linked node. Without any node it takes no lock. */
int nn__storage_exported(const void *p);

#endif
