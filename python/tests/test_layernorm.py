"""Layer normalisation from Python on the reference backend: the Context method against numpy,
and nnprim.torch's layer_norm / LayerNorm against torch.nn in float64 (gradcheck, equal outputs
and gradients with the same state_dict)."""
import numpy as np
import pytest

import nnprim

torch = pytest.importorskip("torch")
import nnprim.torch as nt  # noqa: E402
from torch.autograd import gradcheck  # noqa: E402

D = torch.float64


@pytest.fixture
def ctx():
    with nnprim.Context("ref") as c:
        yield c


def test_context_layernorm_against_numpy(ctx):
    x = np.arange(12.0).reshape(3, 4) ** 1.5
    g, b = np.linspace(0.5, 2.0, 4), np.linspace(-1.0, 1.0, 4)
    y, pb = ctx.layernorm(x, g, b, eps=1e-3, training=True)
    m, v = x.mean(1, keepdims=True), x.var(1, keepdims=True)  # biased, as torch's
    xhat = (x - m) / np.sqrt(v + 1e-3)
    np.testing.assert_allclose(y.numpy(), xhat * g + b, rtol=1e-13, atol=1e-13)
    dy = np.cos(np.arange(12.0)).reshape(3, 4)
    dx, dg, db = np.zeros_like(x), np.ones(4), np.zeros(4)
    ctx.layernorm_backward(pb, dy, dx, dg, db, accumulate=nnprim._abi.NN_ACCUMULATE_DW)
    np.testing.assert_allclose(db, dy.sum(0), rtol=1e-14)
    np.testing.assert_allclose(dg, 1 + (dy * xhat).sum(0), rtol=1e-13)
    gdy = dy * g
    want = (gdy - gdy.mean(1, keepdims=True) - xhat * (gdy * xhat).mean(1, keepdims=True)) \
        / np.sqrt(v + 1e-3)
    np.testing.assert_allclose(dx, want, rtol=1e-12, atol=1e-13)
    with pytest.raises(nnprim.PullbackError):
        ctx.layernorm_backward(pb, dy, dx)
    with pytest.raises(nnprim.ShapeError, match="normalized_rank"):
        ctx.layernorm(x, normalized_rank=3)


def test_gradcheck_layer_norm():
    torch.manual_seed(0)
    for xs, ns in (((4, 5), (5,)), ((2, 3, 4), (3, 4)), ((6,), 6)):
        shape = (ns,) if isinstance(ns, int) else ns
        x = torch.randn(*xs, dtype=D, requires_grad=True)
        w = (torch.rand(*shape, dtype=D) + 0.5).requires_grad_()
        b = torch.randn(*shape, dtype=D, requires_grad=True)
        assert gradcheck(lambda x, w, b: nt.layer_norm(x, ns, w, b), (x, w, b))
        assert gradcheck(lambda x: nt.layer_norm(x, ns, eps=0.1), (x,))
        assert gradcheck(lambda x, w: nt.layer_norm(x, ns, w, None), (x, w))


def test_layer_norm_module_equals_torch():
    torch.manual_seed(1)
    for shape, ns, affine in (((8, 16), 16, True), ((2, 5, 3, 4), (3, 4), True),
                              ((3, 7), 7, False)):
        ref = torch.nn.LayerNorm(ns, elementwise_affine=affine, dtype=D)
        mine = nt.LayerNorm(ns, elementwise_affine=affine, dtype=D)
        if affine:
            with torch.no_grad():
                ref.weight.uniform_(0.5, 1.5)
                ref.bias.uniform_(-1, 1)
        mine.load_state_dict(ref.state_dict())
        x = torch.randn(*shape, dtype=D, requires_grad=True)
        ym, yr = mine(x), ref(x)
        torch.testing.assert_close(ym, yr, rtol=1e-12, atol=1e-12)
        r = torch.randn_like(yr)
        gm = torch.autograd.grad((ym * r).sum(), [x] + list(mine.parameters()))
        gr = torch.autograd.grad((yr * r).sum(), [x] + list(ref.parameters()))
        for a, e in zip(gm, gr):
            torch.testing.assert_close(a, e, rtol=1e-11, atol=1e-12)
        with torch.no_grad():
            torch.testing.assert_close(mine(x), ref(x), rtol=1e-12, atol=1e-12)


def test_layer_norm_bad_shape_raises():
    x = torch.randn(3, 4, dtype=D)
    with pytest.raises(nnprim.InvalidArgumentError, match="normalized_shape"):
        nt.layer_norm(x, (5,))
