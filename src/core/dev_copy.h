/* Device-to-device copies as one kernel node of a CUDA graph: up to NN__COPIES_MAX buffers per
 * launch, repointed with one exec update. The recurrent layers' replay moves the caller's tensors
 * in and out of its staging buffers this way (docs/RNN.md). Graph memcpy nodes did the same job
 * at several times the cost: on the H200 each one adds latency to a launch, and repointing them
 * costs an update apiece (docs/PERFORMANCE.md, "Why replay helps"). Only for files compiled with
 * NN_HAVE_CUDA. */
#ifndef NN_CORE_DEV_COPY_H
#define NN_CORE_DEV_COPY_H

#include <stdint.h>

#include "core/cuda_util.h"

#if NN_HAVE_CUDA

#define NN__COPIES_MAX 16

/* The kernel's parameter, byte for byte (src/core/dev_copy.cu): copy i moves bytes[i] bytes from
 * src[i] to dst[i], for i < n; the buffers of one copy must not overlap. */
struct nn__copies {
    uint64_t dst[NN__COPIES_MAX], src[NN__COPIES_MAX], bytes[NN__COPIES_MAX];
    uint32_t n;
};
/* the kernel's side (src/core/dev_copy.cu) checks the same size */
_Static_assert(sizeof(struct nn__copies) == 392, "struct nn__copies is the kernel's parameter");

/* NULL where this build and process can run the copy kernel, else why not (static text: the build
 * had no nvcc, or the driver refused the kernel's image). The image is loaded once per process, at
 * the first call, and kept for the process's life (libnnprim is never unloaded: -z nodelete). */
const char *nn__copies_unavailable(void);

/* Adds to g a kernel node doing c's copies after the ndeps nodes of deps, into *node. Fails
 * (NN_E_UNSUPPORTED) where nn__copies_unavailable() says why, else as CUDA does. */
nn_status nn__graph_add_copies(struct nn_ctx *ctx, cudaGraph_t g, const cudaGraphNode_t *deps,
                               size_t ndeps, const struct nn__copies *c, cudaGraphNode_t *node);

/* Points the node of an instantiated graph x, added by nn__graph_add_copies, at c's copies (host
 * work only; the next launch uses them). c->n and each bytes[i] may differ from the node's.
 * Returns CUDA's answer and records nothing: a caller that can rebuild the graph instead does. */
cudaError_t nn__graph_exec_set_copies(cudaGraphExec_t x, cudaGraphNode_t node,
                                      const struct nn__copies *c);

#endif
#endif
