"""The package over the reference backend: values against NumPy, lifetimes, errors."""
import gc
import logging
import math

import numpy as np
import pytest

import nnprim
from nnprim import _abi, dlpack


def test_context_manager_closes_and_refuses_use_after(ctx):
    with nnprim.Context(backend="ref", env=False) as c:
        assert c.backend == "ref" and not c.closed
        t = c.empty((2, 3), "float64")
    assert c.closed
    with pytest.raises(nnprim.ClosedError, match="context is closed"):
        c.empty((2,))
    with pytest.raises(nnprim.ClosedError, match="tensor freed"):
        t.shape
    c.close()  # twice is fine


def test_settings_as_keywords():
    with nnprim.Context(backend="ref", env=False, plan_cache_capacity=7, deterministic=True,
                        math_mode="tf32") as c:
        s = c.settings()
        assert s["plan_cache_capacity"] == 7 and s["deterministic"] == 1
        assert s["math_mode"] == _abi.NN_MATH_TF32 and s["backend"] == _abi.NN_BACKEND_REF
    with pytest.raises(TypeError, match="unknown setting 'plan_cache_size'"):
        nnprim.Context(backend="ref", plan_cache_size=3)
    with pytest.raises(nnprim.InvalidArgumentError, match="tuning='fast'"):
        nnprim.Context(backend="ref", tuning="fast")
    with pytest.raises(nnprim.InvalidArgumentError) as e:
        nnprim.Context(backend="ref", env=False, plan_cache_capacity=0)
    assert e.value.name == "NN_E_INVALID_ARG" and e.value.call == "nn_ctx_create"
    assert "plan_cache_capacity" in e.value.message


def test_library_path_argument_and_missing_library():
    with pytest.raises(OSError, match="libnnprim.so not found.*/nonexistent/libnnprim.so"):
        nnprim.Context(backend="ref", library="/nonexistent/libnnprim.so")


def conv_ref(x, w, b, pad):
    N, C, H, W = x.shape
    K, _, R, S = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    Ho, Wo = H + 2 * pad - R + 1, W + 2 * pad - S + 1
    y = np.zeros((N, K, Ho, Wo))
    for i in range(Ho):
        for j in range(Wo):
            y[:, :, i, j] = np.einsum("ncrs,kcrs->nk", xp[:, :, i:i + R, j:j + S], w)
    return y + b[None, :, None, None]


def test_conv_forward_backward_against_numpy(ctx):
    rng = np.random.default_rng(1)
    x, w, b = rng.normal(size=(2, 3, 5, 4)), rng.normal(size=(4, 3, 3, 3)), rng.normal(size=4)
    y, pb = ctx.conv(x, w, b, padding=1, training=True)
    assert y.shape == (2, 4, 5, 4)
    np.testing.assert_allclose(y.numpy(), conv_ref(x, w, b, 1), rtol=0, atol=1e-12)
    dy = rng.normal(size=y.shape)
    dx, dw, db = np.full_like(x, np.nan), np.full_like(w, np.nan), np.full_like(b, np.nan)
    ctx.conv_backward(pb, dy, dx, dw, db)
    np.testing.assert_allclose(db, dy.sum(axis=(0, 2, 3)), atol=1e-12)
    # dw and dx by the directional derivative of <y, dy>
    eps = 1e-6
    v = rng.normal(size=w.shape)
    fd = ((conv_ref(x, w + eps * v, b, 1) - conv_ref(x, w - eps * v, b, 1)) * dy).sum() / (2 * eps)
    assert abs((dw * v).sum() - fd) < 1e-6
    u = rng.normal(size=x.shape)
    fd = ((conv_ref(x + eps * u, w, b, 1) - conv_ref(x - eps * u, w, b, 1)) * dy).sum() / (2 * eps)
    assert abs((dx * u).sum() - fd) < 1e-6


def test_pullback_used_twice_raises(ctx):
    x, w = np.ones((1, 2, 3)), np.ones((2, 2, 1))
    y, pb = ctx.conv(x, w, training=True)
    dy, dx = np.ones((1, 2, 3)), np.zeros((1, 2, 3))
    ctx.conv_backward(pb, dy, dx)
    np.testing.assert_array_equal(dx, np.full((1, 2, 3), 2.0))
    with pytest.raises(nnprim.PullbackError, match="already consumed"):
        ctx.conv_backward(pb, dy, dx)
    _, pb3 = ctx.conv(x, w, training=True)
    with pytest.raises(nnprim.PullbackError, match="is a conv pullback, not a linear one"):
        ctx.linear_backward(pb3, dy, dx)
    ctx.conv_backward(pb3, dy, dx)  # still live: the refused call consumed nothing
    with nnprim.Context(backend="ref", env=False) as other:
        _, pb2 = ctx.conv(x, w, training=True)
        with pytest.raises(nnprim.PullbackError, match="another context"):
            other.conv_backward(pb2, dy, dx)


def test_linear_and_accumulate(ctx):
    rng = np.random.default_rng(2)
    x, w, b = rng.normal(size=(2, 3, 5)), rng.normal(size=(4, 5)), rng.normal(size=4)
    y, pb = ctx.linear(x, w, b, training=True)
    np.testing.assert_allclose(y.numpy(), x @ w.T + b, atol=1e-12)
    dy = rng.normal(size=(2, 3, 4))
    dx, dw, db = np.zeros_like(x), np.ones_like(w), np.ones_like(b)
    ctx.linear_backward(pb, dy, dx, dw, db,
                        accumulate=nnprim.NN_ACCUMULATE_DW | nnprim.NN_ACCUMULATE_DB)
    np.testing.assert_allclose(dx, dy @ w, atol=1e-12)
    np.testing.assert_allclose(dw, 1 + dy.reshape(-1, 4).T @ x.reshape(-1, 5), atol=1e-12)
    np.testing.assert_allclose(db, 1 + dy.sum(axis=(0, 1)), atol=1e-12)


def test_max_pool_and_backward(ctx):
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)[:, :, :, ::-1].copy()
    y, pb = ctx.pool(x, 2, training=True)
    np.testing.assert_array_equal(y.numpy()[0, 0], [[5, 7], [13, 15]][::1] and
                                  x[0, 0].reshape(2, 2, 2, 2).max(axis=(1, 3)))
    dx = np.full_like(x, np.nan)
    ctx.pool_backward(pb, np.ones((1, 1, 2, 2), np.float32), dx)
    assert dx.sum() == 4 and set(np.unique(dx)) == {0.0, 1.0}


def test_softmax_and_cross_entropy(ctx):
    x = np.full((2, 4), 3.0)
    np.testing.assert_allclose(ctx.softmax(x, log=True).numpy(), -math.log(4) * np.ones((2, 4)))
    t = np.array([1, 3], np.int64)
    loss, pb = ctx.cross_entropy(x, t, training=True)
    np.testing.assert_allclose(loss.numpy(), [math.log(4)] * 2)
    dx = np.zeros_like(x)
    ctx.cross_entropy_backward(pb, np.array([1.0, 2.0]), dx)
    exp = (0.25 - np.eye(4)[t]) * np.array([[1.0], [2.0]])
    np.testing.assert_allclose(dx, exp, atol=1e-15)
    with pytest.raises(nnprim.DtypeError, match="targets dtype float64"):
        ctx.cross_entropy(x, np.array([1.0, 3.0]))


def test_lstm_zero_weights_gate_order(ctx):
    p = ctx.rnn_params("lstm", 3, 2)
    w = np.zeros(ctx.rnn_weights_size(p, "float64"))
    bih = ctx.rnn_weight_view(p, w, 0, 0, "bias_ih").numpy()
    bih[:] = [0.1] * 2 + [0.2] * 2 + [0.3] * 2 + [0.4] * 2  # i, f, g, o
    y, hy, cy = ctx.rnn(p, np.full((2, 1, 3), 0.7), w)
    s = lambda v: 1 / (1 + math.exp(-v))  # noqa: E731
    c = 0.0
    for _ in range(2):
        c = s(0.2) * c + s(0.1) * math.tanh(0.3)
    np.testing.assert_allclose(cy.numpy().ravel(), [c, c], atol=1e-15)
    np.testing.assert_allclose(hy.numpy().ravel(), [s(0.4) * math.tanh(c)] * 2, atol=1e-15)


def test_rnn_backward_overwrites_dw_or_adds_to_it(ctx):
    # the tensors travel by role (nn_rnn_forward_tensors / nn_rnn_backward_tensors); dw is
    # overwritten unless accumulate asks NN_ACCUMULATE_DW
    p = ctx.rnn_params("lstm", 3, 2)
    rng = np.random.default_rng(5)
    w = rng.uniform(-0.5, 0.5, ctx.rnn_weights_size(p, "float64"))
    x, dy = rng.uniform(-1, 1, (4, 2, 3)), rng.uniform(-1, 1, (4, 2, 2))
    grads = []
    for acc in (0, _abi.NN_ACCUMULATE_DW):
        (y, hy, cy), pb = ctx.rnn(p, x, w, lengths=[4, 2], training=True)
        np.testing.assert_array_equal(y.numpy()[2:, 1], 0)  # padded positions
        dw, dx = np.full_like(w, 3.0), np.full_like(x, np.nan)
        ctx.rnn_backward(pb, dy=dy, dx=dx, dw=dw, accumulate=acc)
        assert np.isfinite(dx).all() and not np.any(dx[2:, 1])
        grads.append(dw)
    assert np.abs(grads[0] - 3.0).max() > 1e-3
    np.testing.assert_allclose(grads[1], grads[0] + 3.0, atol=1e-12)
    with pytest.raises(nnprim.ShapeError, match=r"nn_rnn_forward: t\.x\.dims\[2\] must be I = 3"):
        ctx.rnn(p, np.zeros((4, 2, 5)), w)


def test_sgd_momentum(ctx):
    prm = np.array([1.0, -2.0])
    opt = ctx.optimizer("sgd", [prm], lr=0.5, momentum=0.5)
    opt.step([np.array([1.0, 2.0])])
    opt.step([np.array([2.0, -4.0])])
    assert opt.steps == 2
    np.testing.assert_allclose(prm, [-0.75, -1.5])
    with pytest.raises(TypeError, match="unknown hyperparameter 'beta'"):
        ctx.optimizer("adam", [prm], beta=0.9)


def test_dlpack_export_roundtrip_and_lifetime(ctx):
    t = ctx.full((3, 2), 1.5, "float64")
    a = np.from_dlpack(t)  # NumPy 1.24 makes it read-only; Tensor.numpy() is writable
    assert a.shape == (3, 2) and (a == 1.5).all()
    t.numpy()[1, 1] = 7.0
    assert a[1, 1] == 7.0  # the same memory
    b = ctx.tensor(t.numpy())  # and back: a view of the same memory
    assert b.data_ptr == t.data_ptr and b.strides == (2, 1)
    with pytest.raises(BufferError):  # NumPy 1.24 does not export read-only arrays
        ctx.tensor(a)
    del a, b
    gc.collect()
    assert dlpack.exported_count() == 0
    cap = t.__dlpack__()
    assert dlpack.exported_count() == 1
    del cap  # never consumed: our destructor deletes it
    gc.collect()
    assert dlpack.exported_count() == 0


def test_tensor_survives_while_exported_and_frees_with_context():
    c = nnprim.Context(backend="ref", env=False)
    t = c.uniform((4,), seed=3, dtype="float64")
    a = np.from_dlpack(t)
    vals = a.copy()
    del t
    gc.collect()
    np.testing.assert_array_equal(a, vals)  # the capsule keeps the tensor alive
    c.close()


def test_bad_input_raises(ctx):
    x = np.ones((1, 2, 4, 4), np.float32)
    with pytest.raises(nnprim.DtypeError, match="dtype"):
        ctx.conv(x.astype(np.int32), np.ones((2, 2, 1, 1), np.float32))
    with pytest.raises(nnprim.DtypeError):
        ctx.conv(x, np.ones((2, 2, 1, 1), np.float64))  # mixed dtypes
    with pytest.raises(nnprim.ShapeError, match="w.dims"):
        ctx.conv(x, np.ones((2, 3, 1, 1), np.float32))
    with pytest.raises(nnprim.InvalidArgumentError, match="rank 2"):
        ctx.conv(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))
    with pytest.raises(nnprim.Error, match="has no __dlpack__"):
        ctx.conv([1.0, 2.0], x)
    with pytest.raises(nnprim.DtypeError, match="float32, float64"):
        ctx.empty((2,), "int8")
    # the recurrent input must be packed: a strided view is refused with nnprim's message
    p = ctx.rnn_params("gru", 3, 2)
    w = np.zeros(ctx.rnn_weights_size(p, "float64"))
    xs = np.zeros((2, 1, 6))[:, :, ::2]
    with pytest.raises(nnprim.Error) as e:
        ctx.rnn(p, xs, w)
    assert e.value.call == "nn_rnn_forward" and "x" in e.value.message


def test_plan_cache_refused_on_the_reference_backend(ctx, tmp_path):
    # the reference backend has no plans: the call says so (test_torch_gpu saves and loads)
    with pytest.raises(nnprim.UnsupportedError, match="reference backend") as e:
        ctx.plan_cache_save(tmp_path / "plans.bin")
    assert e.value.name == "NN_E_UNSUPPORTED" and e.value.call == "nn_plan_cache_save"


def test_log_lines_go_to_logging(caplog):
    with caplog.at_level(logging.INFO, logger="nnprim"):
        with nnprim.Context(backend="ref", env=False, verbose=1, log="logging") as c:
            c.linear(np.ones((2, 3)), np.ones((4, 3)))
    lines = [r.getMessage() for r in caplog.records if r.name == "nnprim"]
    assert any("linear" in line for line in lines), lines


def test_library_search_order(monkeypatch):
    from nnprim import _lib
    monkeypatch.setenv("NNPRIM_LIBRARY", "/from/env/libnnprim.so")
    assert _lib.candidates("/explicit/libnnprim.so") == ["/explicit/libnnprim.so"]
    assert _lib.candidates() == ["/from/env/libnnprim.so"]
    monkeypatch.delenv("NNPRIM_LIBRARY")
    assert _lib.candidates()[-1] in ("libnnprim.so",) or "nnprim" in _lib.candidates()[-1]


def test_frees_inside_a_callback_wait_for_the_next_call(ctx):
    from nnprim import _lib
    t = ctx.empty((4,), "float64")
    with _lib.callback_scope():  # as inside an allocator hook: nnprim must not be called
        del t
        gc.collect()
        waiting = [f for f in _lib._deferred if isinstance(f.__self__, nnprim.Tensor)]
        assert len(waiting) == 1 and len(ctx._live) == 1
    ctx.empty((1,))  # the next call frees it first
    assert not _lib._deferred
    gc.collect()
    assert len(ctx._live) == 0
