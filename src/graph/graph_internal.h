/* What the context assembly needs of the graph layer. */
#ifndef NN_GRAPH_GRAPH_INTERNAL_H
#define NN_GRAPH_GRAPH_INTERNAL_H

struct nn_ctx;

/* The context goes: an open capture is ended and discarded, every live graph of ctx is freed (its
 * handle is no longer live), and all graph memory returns to the pool. */
void nn__graph_ctx_fini(struct nn_ctx *ctx);

#endif
