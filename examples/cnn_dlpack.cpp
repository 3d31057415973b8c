// nnprim inside a framework, in C++17: the tiny CNN of cnn_train.c (conv 3x3 + bias + fused relu
// -> max pool 2x2 -> conv 3x3 + bias, a student learning a fixed teacher by SGD) trained on
// tensors that the "framework" below owns and hands to nnprim as DLPack capsules, with nnprim's
// own device memory (workspaces, pullback buffers, temporaries) taken from the framework's
// allocator through nn_mem_set_allocator().
//
// The framework side is what PyTorch or a C++ engine would do: it allocates its tensors (host
// memory for the reference backend, cudaMalloc for cuDNN), wraps each one in its own
// DLManagedTensor with a deleter, and calls the deleter when it drops the tensor. nnprim only
// borrows the memory (nn_tensor_from_dlpack(): no copy); it never calls the deleter.
//
// The allocator counts its calls. Reference contexts compute in host memory that nnprim takes
// from its host allocator, not from the device allocator, so on the reference backend the
// counts stay 0 and the program says so; on cuDNN every nnprim device allocation goes through
// it, and all of them are given back by the end.
//
//   example_cnn_dlpack [steps [ref|cudnn|auto [nchw|nhwc]]]
// nhwc makes every image and filter tensor channels-last (PyTorch's channels_last), the layout
// cuDNN's tensor-core engines prefer; the loss curve is the same.
// Prints the loss per step and the allocator's counts; exits 1 unless the loss fell at least 10x
// and (on cuDNN) the allocator served allocations and got every one back; exits 77 (a skip for
// meson's test runner) when asked for cudnn on a machine without a usable GPU.
#include <dlpack/dlpack.h>
#include <nnprim/dlpack.h>
#include <nnprim/nnprim.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef EXAMPLE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace
{

constexpr int64_t kBatch = 16, kC0 = 1, kC1 = 4, kC2 = 2, kHW = 8;

// Any nnprim failure ends the program with nnprim's message.
void check(nn_status st, const char *what)
{
    if (st != NN_OK)
        throw std::runtime_error(std::string(what) + ": " + nn_status_name(st) + ": " +
                                 nn_last_error()->message);
}

#ifdef EXAMPLE_HAVE_CUDA
void check_cuda(cudaError_t e, const char *what)
{
    if (e != cudaSuccess)
        throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
#endif

// ---------------------------------------------------------------------------------------------
// The framework: its tensors, exported as DLPack capsules, and its allocator.

std::atomic<int> capsules_alive{0};

struct Storage {
    std::vector<int64_t> shape, strides; // strides empty: compact row-major
    void *data = nullptr;
    bool device = false;
};

// Channels-last strides (PyTorch's channels_last): C fastest, then W, H, ..., N slowest.
std::vector<int64_t> channels_last_strides(const std::vector<int64_t> &shape)
{
    std::vector<int64_t> st(shape.size());
    int64_t s = shape[1];
    st[1] = 1;
    for (size_t i = shape.size() - 1; i >= 2; i--) {
        st[i] = s;
        s *= shape[i];
    }
    st[0] = s;
    return st;
}

void storage_release(Storage *s)
{
#ifdef EXAMPLE_HAVE_CUDA
    if (s->device) {
        cudaFree(s->data);
        return;
    }
#endif
    std::free(s->data);
}

// A capsule as a framework makes one: its own storage (packed, row-major or channels-last), its
// own deleter.
DLManagedTensor *make_capsule(const std::vector<int64_t> &shape, bool channels_last, bool device,
                              int device_id)
{
    auto storage = std::make_unique<Storage>();
    storage->shape = shape;
    if (channels_last) storage->strides = channels_last_strides(shape);
    storage->device = device;
    size_t bytes = sizeof(float);
    for (int64_t d : shape)
        bytes *= static_cast<size_t>(d);
#ifdef EXAMPLE_HAVE_CUDA
    if (device) {
        check_cuda(cudaSetDevice(device_id), "cudaSetDevice");
        check_cuda(cudaMalloc(&storage->data, bytes), "cudaMalloc");
    }
#endif
    if (!device) storage->data = std::calloc(1, bytes);
    if (!storage->data) throw std::runtime_error("framework: out of memory");
    auto *m = new DLManagedTensor{};
    m->dl_tensor.data = storage->data;
    m->dl_tensor.device.device_type = device ? kDLCUDA : kDLCPU;
    m->dl_tensor.device.device_id = device ? device_id : 0;
    m->dl_tensor.ndim = static_cast<int>(shape.size());
    m->dl_tensor.dtype.code = kDLFloat;
    m->dl_tensor.dtype.bits = 32;
    m->dl_tensor.dtype.lanes = 1;
    m->dl_tensor.shape = storage->shape.data();
    m->dl_tensor.strides = storage->strides.empty() ? nullptr : storage->strides.data();
    m->dl_tensor.byte_offset = 0;
    m->manager_ctx = storage.release();
    m->deleter = [](DLManagedTensor *self) {
        auto *s = static_cast<Storage *>(self->manager_ctx);
        storage_release(s);
        delete s;
        delete self;
        capsules_alive--;
    };
    capsules_alive++;
    return m;
}

// What the framework's allocator saw.
struct AllocCounts {
    std::atomic<uint64_t> allocs{0}, frees{0};
    std::atomic<int64_t> live_bytes{0};
};

void *fw_alloc(void *user, size_t bytes, int device, void *stream)
{
    (void)stream; // cudaMalloc memory is usable by every stream
    auto *c = static_cast<AllocCounts *>(user);
    void *p = nullptr;
#ifdef EXAMPLE_HAVE_CUDA
    int prev = 0;
    if (device >= 0 && cudaGetDevice(&prev) == cudaSuccess &&
        cudaSetDevice(device) == cudaSuccess) {
        if (cudaMalloc(&p, bytes) != cudaSuccess) p = nullptr;
        cudaSetDevice(prev); // the caller's current device stays as it was
    }
#else
    (void)device;
#endif
    if (!p) return nullptr;
    c->allocs++;
    c->live_bytes += static_cast<int64_t>(bytes);
    return p;
}

void fw_free(void *user, void *p, size_t bytes, int device, void *stream)
{
    (void)device;
    (void)stream; // cudaFree waits for the device's queued work, so any stream's work is done
    auto *c = static_cast<AllocCounts *>(user);
#ifdef EXAMPLE_HAVE_CUDA
    cudaFree(p);
#else
    (void)p;
#endif
    c->frees++;
    c->live_bytes -= static_cast<int64_t>(bytes);
}

// ---------------------------------------------------------------------------------------------
// The model, on nnprim views of the framework's capsules.

class Model
{
  public:
    Model(nn_ctx *ctx, nn_ctx *host, bool nhwc) : ctx_(ctx), host_(host), nhwc_(nhwc)
    {
        nn_settings s;
        check(nn_ctx_get_settings(ctx, &s), "nn_ctx_get_settings");
        device_ = nn_ctx_backend(ctx) == NN_BACKEND_CUDNN;
        device_id_ = s.device;
    }
    ~Model()
    {
        for (DLManagedTensor *m : capsules_)
            m->deleter(m); // the framework drops its tensors; nnprim holds no reference
    }
    Model(const Model &) = delete;
    Model &operator=(const Model &) = delete;

    // A framework tensor, and nnprim's view of it: images and filters channels-last when the
    // model is.
    nn_tensor tensor(std::vector<int64_t> shape)
    {
        DLManagedTensor *m = make_capsule(shape, nhwc_ && shape.size() == 4, device_, device_id_);
        capsules_.push_back(m);
        nn_tensor t;
        check(nn_tensor_from_dlpack(ctx_, m, &t), "nn_tensor_from_dlpack");
        return t;
    }

    // The elements in the order of their memory (the host arithmetic here is elementwise over
    // tensors of one layout, so that order serves; device copies must be packed anyway).
    std::vector<float> read(const nn_tensor &t)
    {
        std::vector<float> h(static_cast<size_t>(nn_tensor_numel(&t)));
        nn_tensor v = host_view(h), ft = flat(t);
        check(nn_tensor_copy(ctx_, &v, &ft), "nn_tensor_copy (to host)");
        return h;
    }

    void write(nn_tensor &t, std::vector<float> &h)
    {
        nn_tensor v = host_view(h), ft = flat(t);
        check(nn_tensor_copy(ctx_, &ft, &v), "nn_tensor_copy (from host)");
        check(nn_ctx_synchronize(ctx_), "nn_ctx_synchronize");
    }

    // Uniform values in [lo, hi) drawn in the order of t's dims (NCHW), whatever t's layout:
    // drawn on the host (nnprim fills packed device tensors only), then laid out as t is.
    void fill_uniform(nn_tensor &t, double lo, double hi, uint64_t seed)
    {
        std::vector<float> logical(static_cast<size_t>(nn_tensor_numel(&t))), mem(logical.size());
        nn_tensor a, b;
        check(nn_tensor_wrap(host_, logical.data(), NN_DTYPE_F32, t.rank, t.dims, nullptr, &a),
              "nn_tensor_wrap");
        check(nn_tensor_fill_uniform(host_, &a, lo, hi, seed), "nn_tensor_fill_uniform");
        check(nn_tensor_wrap(host_, mem.data(), NN_DTYPE_F32, t.rank, t.dims, t.strides, &b),
              "nn_tensor_wrap");
        check(nn_tensor_copy(host_, &b, &a), "nn_tensor_copy (layout)");
        write(t, mem);
    }

    nn_ctx *ctx() const
    {
        return ctx_;
    }

  private:
    static nn_tensor flat(const nn_tensor &t)
    {
        nn_tensor v = t;
        v.rank = 1;
        v.dims[0] = nn_tensor_numel(&t);
        v.strides[0] = 1;
        return v;
    }

    nn_tensor host_view(std::vector<float> &h)
    {
        nn_tensor v;
        int64_t n = static_cast<int64_t>(h.size());
        check(nn_tensor_wrap(host_, h.data(), NN_DTYPE_F32, 1, &n, nullptr, &v), "nn_tensor_wrap");
        return v;
    }

    nn_ctx *ctx_, *host_;
    bool nhwc_, device_ = false;
    int device_id_ = -1;
    std::vector<DLManagedTensor *> capsules_;
};

struct Layer {
    nn_conv_params p;
    nn_tensor w, b, dw, db;
};

Layer make_layer(Model &m, int64_t cin, int64_t cout, nn_activation act, uint64_t seed)
{
    Layer l;
    check(nn_conv_params_default(&l.p, 2), "nn_conv_params_default");
    l.p.pad_lo[0] = l.p.pad_lo[1] = l.p.pad_hi[0] = l.p.pad_hi[1] = 1;
    l.p.activation = act;
    l.w = m.tensor({cout, cin, 3, 3});
    l.dw = m.tensor({cout, cin, 3, 3});
    l.b = m.tensor({cout});
    l.db = m.tensor({cout});
    m.fill_uniform(l.w, -0.5, 0.5, seed);
    m.fill_uniform(l.b, -0.1, 0.1, seed + 1);
    return l;
}

struct Net {
    Layer c1, c2;
    nn_pool_params pool;
};

struct Acts {
    nn_tensor h1, h2, y;
};

struct Pullbacks {
    nn_conv_pullback *c1 = nullptr, *c2 = nullptr;
    nn_pool_pullback *pool = nullptr;
};

void forward(nn_ctx *ctx, Net &n, const nn_tensor &x, Acts &a, Pullbacks *pb)
{
    check(nn_conv_forward(ctx, &n.c1.p, &x, &n.c1.w, &n.c1.b, &a.h1, pb ? &pb->c1 : nullptr),
          "conv1 forward");
    check(nn_pool_forward(ctx, &n.pool, &a.h1, &a.h2, pb ? &pb->pool : nullptr), "pool forward");
    check(nn_conv_forward(ctx, &n.c2.p, &a.h2, &n.c2.w, &n.c2.b, &a.y, pb ? &pb->c2 : nullptr),
          "conv2 forward");
}

void sgd(Model &m, nn_tensor &w, const nn_tensor &dw, float lr)
{
    std::vector<float> hw = m.read(w), hd = m.read(dw);
    for (size_t i = 0; i < hw.size(); i++)
        hw[i] -= lr * hd[i];
    m.write(w, hw);
}

// Trains for steps steps; returns the first and the last loss.
std::pair<double, double> train(Model &m, int steps)
{
    nn_ctx *ctx = m.ctx();
    nn_pool_params pool;
    std::memset(&pool, 0, sizeof pool);
    pool.spatial_rank = 2;
    pool.mode = NN_POOL_MAX;
    pool.window[0] = pool.window[1] = 2;
    pool.stride[0] = pool.stride[1] = 2;
    Net teacher{make_layer(m, kC0, kC1, NN_ACTIVATION_RELU, 100),
                make_layer(m, kC1, kC2, NN_ACTIVATION_IDENTITY, 200), pool};
    Net student{make_layer(m, kC0, kC1, NN_ACTIVATION_RELU, 300),
                make_layer(m, kC1, kC2, NN_ACTIVATION_IDENTITY, 400), pool};
    Acts a{m.tensor({kBatch, kC1, kHW, kHW}), m.tensor({kBatch, kC1, kHW / 2, kHW / 2}),
           m.tensor({kBatch, kC2, kHW / 2, kHW / 2})};
    nn_tensor x = m.tensor({kBatch, kC0, kHW, kHW});
    nn_tensor dy = m.tensor({kBatch, kC2, kHW / 2, kHW / 2});
    nn_tensor dh2 = m.tensor({kBatch, kC1, kHW / 2, kHW / 2});
    nn_tensor dh1 = m.tensor({kBatch, kC1, kHW, kHW});
    m.fill_uniform(x, -1, 1, 7);
    forward(ctx, teacher, x, a, nullptr);
    const std::vector<float> target = m.read(a.y);

    double first = 0, last = 0;
    for (int step = 0; step < steps; step++) {
        Pullbacks pb;
        forward(ctx, student, x, a, &pb);
        // loss = 0.5 * sum (y - t)^2 / N; dy = (y - t) / N
        std::vector<float> hy = m.read(a.y);
        double loss = 0;
        for (size_t i = 0; i < hy.size(); i++) {
            double d = hy[i] - target[i];
            loss += 0.5 * d * d / kBatch;
            hy[i] = static_cast<float>(d / kBatch);
        }
        m.write(dy, hy);
        check(nn_conv_backward(ctx, &pb.c2, &dy, &dh2, &student.c2.dw, &student.c2.db),
              "conv2 backward");
        check(nn_pool_backward(ctx, &pb.pool, &dh2, &dh1), "pool backward");
        check(nn_conv_backward(ctx, &pb.c1, &dh1, nullptr, &student.c1.dw, &student.c1.db),
              "conv1 backward");
        for (Layer *l : {&student.c1, &student.c2}) {
            sgd(m, l->w, l->dw, 0.03f);
            sgd(m, l->b, l->db, 0.03f);
        }
        if (step == 0) first = loss;
        last = loss;
        std::printf("step %4d  loss %.6f\n", step, loss);
    }
    check(nn_ctx_synchronize(ctx), "nn_ctx_synchronize");
    return {first, last};
}

nn_backend backend_arg(const char *s)
{
    std::string v = s ? s : "auto";
    if (v == "ref") return NN_BACKEND_REF;
    if (v == "cudnn") return NN_BACKEND_CUDNN;
    if (v == "auto") return NN_BACKEND_AUTO;
    throw std::runtime_error("backend must be ref, cudnn or auto, got " + v);
}

int run(int steps, nn_backend backend, bool nhwc)
{
    if (!(nn_build_features() & NN_FEATURE_DLPACK))
        throw std::runtime_error("this nnprim was built without DLPack (libdlpack-dev)");
    nn_settings s;
    check(nn_settings_defaults(&s), "nn_settings_defaults"); // a framework: no NNPRIM_* variables
    s.backend = backend;
    nn_ctx *ctx = nullptr, *host = nullptr;
    nn_status made = nn_ctx_create(&ctx, &s);
    if (backend == NN_BACKEND_CUDNN && (made == NN_E_NO_DEVICE || made == NN_E_NOT_BUILT)) {
        // Asked for cuDNN where there is none: exit 77, which meson counts as a skip.
        std::printf("skip: no usable cuDNN backend here: %s\n", nn_last_error()->message);
        return 77;
    }
    check(made, "nn_ctx_create");
    s.backend = NN_BACKEND_REF; // the framework's host side: wraps the host copies
    nn_status st = nn_ctx_create(&host, &s);
    if (st != NN_OK) nn_ctx_destroy(ctx);
    check(st, "nn_ctx_create (host)");
    bool on_gpu = nn_ctx_backend(ctx) == NN_BACKEND_CUDNN;
    nn_settings got;
    check(nn_ctx_get_settings(ctx, &got), "nn_ctx_get_settings");
    std::printf("backend: %s, layout: %s\n", on_gpu ? "cudnn" : "ref", nhwc ? "nhwc" : "nchw");

    AllocCounts counts;
    nn_mem_allocator a;
    std::memset(&a, 0, sizeof a);
    a.alloc = fw_alloc;
    a.free = fw_free;
    a.user = &counts;
    // Reference contexts take no device memory: the allocator is set only where it is used.
    if (on_gpu) check(nn_mem_set_allocator(got.device, &a), "nn_mem_set_allocator");

    std::pair<double, double> loss{0, 0};
    std::string failure;
    try {
        Model m(ctx, host, nhwc);
        loss = train(m, steps);
    } catch (const std::exception &e) {
        failure = e.what();
    }
    nn_ctx_destroy(host);
    nn_ctx_destroy(ctx);
    if (on_gpu) check(nn_mem_set_allocator(got.device, nullptr), "nn_mem_set_allocator (unset)");
    if (!failure.empty()) throw std::runtime_error(failure);

    std::printf("loss %.6f -> %.6f (%.1fx lower)\n", loss.first, loss.second,
                loss.first / loss.second);
    std::printf("capsules still alive: %d\n", capsules_alive.load());
    std::printf("allocator: %llu allocations, %llu frees, %lld bytes outstanding%s\n",
                static_cast<unsigned long long>(counts.allocs.load()),
                static_cast<unsigned long long>(counts.frees.load()),
                static_cast<long long>(counts.live_bytes.load()),
                on_gpu ? "" : " (not used: the reference backend computes in host memory)");
    bool ok = loss.second * 10 <= loss.first && capsules_alive.load() == 0;
    if (on_gpu)
        ok = ok && counts.allocs.load() > 0 && counts.frees.load() == counts.allocs.load() &&
             counts.live_bytes.load() == 0;
    else
        ok = ok && counts.allocs.load() == 0;
    return ok ? 0 : 1;
}

} // namespace

int main(int argc, char **argv)
{
    try {
        int steps = argc > 1 ? std::atoi(argv[1]) : 600;
        std::string layout = argc > 3 ? argv[3] : "nchw";
        if (layout != "nchw" && layout != "nhwc")
            throw std::runtime_error("layout must be nchw or nhwc, got " + layout);
        return run(steps > 0 ? steps : 1, backend_arg(argc > 2 ? argv[2] : nullptr),
                   layout == "nhwc");
    } catch (const std::exception &e) {
        std::fprintf(stderr, "example_cnn_dlpack: %s\n", e.what());
        return 1;
    }
}
