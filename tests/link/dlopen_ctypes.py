#!/usr/bin/env python3
"""Loads libnnprim.so through ctypes, as a Python binding would, and runs a 3x3 convolution of
ones (every output 9) on a context of the backend given.

    dlopen_ctypes.py LIBNNPRIM VERSION ref|cudnn

The structs stay opaque: nnprim fills buffers larger than them (parameters, tensor views), and
only a view's first field, its data pointer, is read. Exit 77 (a skip for meson) for cudnn
without a usable GPU, with the reason."""
import ctypes
import os
import sys

path, version, backend = sys.argv[1:4]
lib = ctypes.CDLL(path)  # fails here with "cannot allocate memory in static TLS block" if not dlopen-safe
lib.nn_version.restype = ctypes.c_char_p
lib.nn_status_string.restype = ctypes.c_char_p
lib.nn_status_name.restype = ctypes.c_char_p
lib.nn_cudnn_runtime_version.restype = ctypes.c_size_t


class LastError(ctypes.Structure):
    # nn_error_info (status.h)
    _fields_ = [("status", ctypes.c_int), ("raw_status", ctypes.c_int), ("line", ctypes.c_int),
                ("call", ctypes.c_char * 64), ("raw_name", ctypes.c_char * 64),
                ("file", ctypes.c_char * 64), ("message", ctypes.c_char * 512)]


lib.nn_last_error.restype = ctypes.POINTER(LastError)


def check(st, what):
    if st != 0:
        msg = lib.nn_last_error().contents.message.decode()
        sys.exit(f"{what}: {lib.nn_status_name(st).decode()}: {msg}")


got = lib.nn_version().decode()
if got != version:
    sys.exit(f"nn_version() = {got}, expected {version}")
if lib.nn_status_string(-2) != b"tensor shapes do not agree":
    sys.exit(f"nn_status_string(NN_E_SHAPE) = {lib.nn_status_string(-2)}")

if backend == "cudnn":
    count = ctypes.c_int(0)
    if lib.nn_device_count(ctypes.byref(count)) != 0 or count.value < 1:
        print("skipped: needs a GPU: no CUDA device")
        sys.exit(77)
    if lib.nn_cudnn_runtime_version() == 0:
        print("skipped: needs a GPU: this build has no cuDNN, or libcudnn cannot be loaded")
        sys.exit(77)


def context(name):
    # NULL settings: the context reads NNPRIM_* from the environment.
    os.environ["NNPRIM_BACKEND"] = name
    ctx = ctypes.c_void_p()
    check(lib.nn_ctx_create(ctypes.byref(ctx), None), f"nn_ctx_create ({name})")
    return ctx


def tensor(ctx, dims):
    view = ctypes.create_string_buffer(1024)  # an nn_tensor is about 150 bytes
    d = (ctypes.c_int64 * len(dims))(*dims)
    check(lib.nn_tensor_empty(ctx, 1, len(dims), d, view), "nn_tensor_empty")  # 1: NN_DTYPE_F32
    return view


ctx = context(backend)
x, w, y = tensor(ctx, [1, 1, 4, 4]), tensor(ctx, [1, 1, 3, 3]), tensor(ctx, [1, 1, 2, 2])
for t in (x, w):
    check(lib.nn_tensor_fill_constant(ctx, t, ctypes.c_double(1.0)), "nn_tensor_fill_constant")
params = ctypes.create_string_buffer(1024)
check(lib.nn_conv_params_default(params, 2), "nn_conv_params_default")
check(lib.nn_conv_forward(ctx, params, x, w, None, y, None), "nn_conv_forward")

host_ctx = context("ref")
out = tensor(host_ctx, [1, 1, 2, 2])
check(lib.nn_tensor_copy(ctx, out, y), "nn_tensor_copy")
data = ctypes.cast(ctypes.c_void_p.from_buffer(out).value, ctypes.POINTER(ctypes.c_float))
values = [data[i] for i in range(4)]
if values != [9.0] * 4:
    sys.exit(f"y = {values}, expected 9 everywhere")
for c, views in ((ctx, (x, w, y)), (host_ctx, (out,))):
    for t in views:
        check(lib.nn_tensor_free(c, t), "nn_tensor_free")
lib.nn_ctx_destroy(host_ctx)
lib.nn_ctx_destroy(ctx)
print(f"ctypes: {path} loaded, nnprim {got}, convolution on {backend}: ok")
