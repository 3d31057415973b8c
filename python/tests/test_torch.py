"""nnprim.torch on the reference backend against torch.nn in float64: gradcheck, outputs and
gradients equal to torch.nn's with the same state_dict, and small models trained with each."""
import gc

import pytest

torch = pytest.importorskip("torch")
import nnprim  # noqa: E402
import nnprim.torch as nt  # noqa: E402
from torch.autograd import gradcheck  # noqa: E402

D = torch.float64


def rand(*shape, grad=True):
    return torch.randn(*shape, dtype=D, requires_grad=grad)


@pytest.fixture(autouse=True)
def seed():
    torch.manual_seed(0)


def test_gradcheck_linear_conv_pool_xent():
    x, w, b = rand(4, 3), rand(2, 3), rand(2)
    assert gradcheck(lambda x, w, b: nt.linear(x, w, b), (x, w, b))
    assert gradcheck(lambda x, w, b: nt.linear(x, w, b, relu=True), (x, w, b))
    for S in (1, 2, 3):
        sp = (5, 4, 3)[:S]
        x, w, b = rand(2, 2, *sp), rand(3, 2, *(2,) * S), rand(3)
        assert gradcheck(lambda x, w, b: nt.conv(x, w, b, stride=1, padding=1), (x, w, b))
    x, w = rand(1, 4, 5, 6), rand(4, 2, 3, 3)
    assert gradcheck(lambda x, w: nt.conv(x, w, None, stride=2, padding=1, dilation=(1, 2),
                                          groups=2), (x, w))
    # distinct values, so that max pooling's argmax does not move under gradcheck's steps
    x = (torch.randperm(2 * 3 * 6 * 6, dtype=D) / 10).reshape(2, 3, 6, 6).requires_grad_()
    assert gradcheck(lambda x: nt.pool(x, 2, mode="max"), (x,))
    assert gradcheck(lambda x: nt.pool(x, 3, stride=2, padding=1, mode="mean_exclude_pad"),
                     (x,))
    x, t = rand(5, 4), torch.tensor([0, 3, 1, 1, 2])
    assert gradcheck(lambda x: nt.cross_entropy(x, t, reduction="none"), (x,))


@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
def test_gradcheck_recurrent(cls):
    m = getattr(nt, cls)(3, 4, num_layers=2, bidirectional=True).double()
    x, h = rand(4, 2, 3), rand(4, 2, 4)
    if cls == "LSTM":
        c = rand(4, 2, 4)
        fn = lambda x, h, c, *ps: m(x, (h, c))  # noqa: E731
        args = (x, h, c)
    else:
        fn = lambda x, h, *ps: m(x, h)  # noqa: E731
        args = (x, h)
    # the parameters are inputs too: gradcheck perturbs them in place
    assert gradcheck(lambda *a: _flatten(fn(*a)), args + tuple(m.parameters()))


def _flatten(out):
    y, h = out
    hs = h if isinstance(h, tuple) else (h,)
    return (y,) + hs


def same_grads(mine, ref, inputs_mine, inputs_ref, tol=1e-12):
    """outputs and gradients of sum(out * r) for a fixed random r, nnprim vs torch.nn."""
    outs_m, outs_r = _flat_outs(mine), _flat_outs(ref)
    assert len(outs_m) == len(outs_r)
    for a, b in zip(outs_m, outs_r):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b, rtol=0, atol=tol)
    rs = [torch.randn_like(o) for o in outs_r]
    gm = torch.autograd.grad(sum((o * r).sum() for o, r in zip(outs_m, rs)), inputs_mine)
    gr = torch.autograd.grad(sum((o * r).sum() for o, r in zip(outs_r, rs)), inputs_ref)
    for a, b in zip(gm, gr):
        torch.testing.assert_close(a, b, rtol=0, atol=tol)


def _flat_outs(o):
    if isinstance(o, torch.Tensor):
        return [o]
    out = []
    for e in o:
        out += _flat_outs(e)
    return out


@pytest.mark.parametrize("kw", [dict(), dict(num_layers=2, bidirectional=True),
                                dict(batch_first=True, bias=False), dict(proj_size=3),
                                dict(num_layers=2, proj_size=2, bidirectional=True)])
def test_lstm_equals_torch(kw):
    ref = torch.nn.LSTM(5, 4, **kw).double()
    mine = nt.LSTM(5, 4, **kw).double()
    mine.load_state_dict(ref.state_dict())
    assert list(mine.state_dict()) == list(ref.state_dict())
    x = rand(3, 6, 5)
    L = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
    h, c = rand(L, 3 if kw.get("batch_first") else 6, kw.get("proj_size") or 4), \
        rand(L, 3 if kw.get("batch_first") else 6, 4)
    same_grads(mine(x, (h, c)), ref(x, (h, c)), [x, h, c] + list(mine.parameters()),
               [x, h, c] + list(ref.parameters()))
    # and without initial state, and unbatched
    same_grads(mine(x), ref(x), [x] + list(mine.parameters()), [x] + list(ref.parameters()))
    xu = rand(6, 5)
    same_grads(mine(xu), ref(xu), [xu], [xu])


@pytest.mark.parametrize("cls,kw", [("GRU", dict(num_layers=2)),
                                    ("GRU", dict(bidirectional=True, batch_first=True)),
                                    ("RNN", dict(nonlinearity="relu", num_layers=2)),
                                    ("RNN", dict(bidirectional=True, bias=False))])
def test_gru_rnn_equal_torch(cls, kw):
    ref = getattr(torch.nn, cls)(3, 4, **kw).double()
    mine = getattr(nt, cls)(3, 4, **kw).double()
    mine.load_state_dict(ref.state_dict())
    x = rand(5, 2, 3)
    same_grads(mine(x), ref(x), [x] + list(mine.parameters()), [x] + list(ref.parameters()))


def test_modules_equal_torch():
    cases = [
        (nt.Linear(6, 3), torch.nn.Linear(6, 3), (2, 5, 6)),
        (nt.Linear(6, 3, bias=False), torch.nn.Linear(6, 3, bias=False), (4, 6)),
        (nt.Conv1d(2, 4, 3, padding=2, dilation=2), torch.nn.Conv1d(2, 4, 3, padding=2,
                                                                     dilation=2), (2, 2, 9)),
        (nt.Conv2d(4, 6, 3, stride=2, padding=1, groups=2),
         torch.nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2), (2, 4, 7, 6)),
        (nt.Conv2d(3, 4, (3, 2), padding="same", bias=False),
         torch.nn.Conv2d(3, 4, (3, 2), padding="same", bias=False), (1, 3, 5, 5)),
        (nt.Conv3d(2, 3, 2, padding=1), torch.nn.Conv3d(2, 3, 2, padding=1), (1, 2, 4, 3, 4)),
    ]
    for mine, ref, shape in cases:
        mine.double(), ref.double()
        mine.load_state_dict(ref.state_dict())
        x = rand(*shape)
        same_grads(mine(x), ref(x), [x] + list(mine.parameters()), [x] + list(ref.parameters()))
    x = (torch.randperm(2 * 2 * 7 * 6, dtype=D)).reshape(2, 2, 7, 6).requires_grad_()
    for mine, ref in ((nt.MaxPool2d(3, 2, 1), torch.nn.MaxPool2d(3, 2, 1)),
                      (nt.AvgPool2d(2), torch.nn.AvgPool2d(2)),
                      (nt.AvgPool2d(3, 1, 1, count_include_pad=False),
                       torch.nn.AvgPool2d(3, 1, 1, count_include_pad=False))):
        same_grads(mine(x), ref(x), [x], [x])
    x1 = torch.randperm(2 * 3 * 9, dtype=D).reshape(2, 3, 9).requires_grad_()
    x3 = torch.randperm(1 * 2 * 4 * 5 * 4, dtype=D).reshape(1, 2, 4, 5, 4).requires_grad_()
    for mine, ref, xx in ((nt.MaxPool1d(3, 2, 1), torch.nn.MaxPool1d(3, 2, 1), x1),
                          (nt.AvgPool1d(2), torch.nn.AvgPool1d(2), x1),
                          (nt.MaxPool3d(2), torch.nn.MaxPool3d(2), x3),
                          (nt.AvgPool3d(2, 1, 1), torch.nn.AvgPool3d(2, 1, 1), x3)):
        same_grads(mine(xx), ref(xx), [xx], [xx])
    x, t = rand(6, 5), torch.randint(0, 5, (6,))
    for red in ("mean", "sum", "none"):
        same_grads(nt.CrossEntropyLoss(reduction=red)(x, t),
                   torch.nn.CrossEntropyLoss(reduction=red)(x, t), [x], [x])
    x, t = rand(2, 4, 3, 2), torch.randint(0, 4, (2, 3, 2))  # spatial targets
    same_grads(nt.CrossEntropyLoss()(x, t), torch.nn.CrossEntropyLoss()(x, t), [x], [x])


def test_inference_without_grad():
    m, r = nt.LSTM(3, 4).double(), torch.nn.LSTM(3, 4).double()
    m.load_state_dict(r.state_dict())
    x = rand(2, 2, 3, grad=False)
    with torch.no_grad():
        torch.testing.assert_close(m(x)[0], r(x)[0], rtol=0, atol=1e-13)
        c = nt.Conv2d(1, 1, 1).double()
        assert not c(rand(1, 1, 2, 2)).requires_grad


def test_retain_graph_backward_twice_accumulates():
    for m in (nt.Linear(3, 2).double(), nt.LSTM(3, 2).double()):
        x = rand(4, 1, 3)
        y = m(x)
        y = y[0] if isinstance(y, tuple) else y
        y.sum().backward(retain_graph=True)
        g1 = x.grad.clone()
        y.sum().backward()
        torch.testing.assert_close(x.grad, 2 * g1, rtol=0, atol=1e-14)


class TinyCNN(torch.nn.Module):
    def __init__(self, lib):
        super().__init__()
        self.conv1 = lib.Conv2d(1, 4, 3, padding=1)
        self.pool = lib.MaxPool2d(2)
        self.conv2 = lib.Conv2d(4, 4, 3, padding=1)
        self.fc = lib.Linear(4 * 4 * 4, 3)

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = self.pool(x)
        x = torch.relu(self.conv2(x))
        return self.fc(x.flatten(1))


class TinyLM(torch.nn.Module):
    def __init__(self, lib, V=6, H=8):
        super().__init__()
        self.lstm = lib.LSTM(V, H, num_layers=2)
        self.out = lib.Linear(H, V)

    def forward(self, x):
        return self.out(self.lstm(x)[0])


def _train(model, lossfn, batches, steps, lr=0.1):
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    losses = []
    for i in range(steps):
        x, t = batches[i % len(batches)]
        opt.zero_grad()
        loss = lossfn(model(x), t)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_small_models_train_like_torch():
    g = torch.Generator().manual_seed(3)
    # images: a bright quadrant names the class
    xs = torch.rand(24, 1, 8, 8, generator=g, dtype=D) * 0.2
    ts = torch.arange(24) % 3
    for i, t in enumerate(ts):
        r, c = divmod(int(t), 2)
        xs[i, 0, 4 * r:4 * r + 4, 4 * c:4 * c + 4] += 1
    cnn_batches = [(xs[:12], ts[:12]), (xs[12:], ts[12:])]
    ref_cnn = TinyCNN(torch.nn).double()
    my_cnn = TinyCNN(nt).double()
    my_cnn.load_state_dict(ref_cnn.state_dict())
    ce_ref, ce_mine = torch.nn.CrossEntropyLoss(), nt.CrossEntropyLoss()
    lr = _train(ref_cnn, ce_ref, cnn_batches, 30)
    lm = _train(my_cnn, ce_mine, cnn_batches, 30)
    assert lm[-1] < 0.3 * lm[0]
    assert max(abs(a - b) for a, b in zip(lm, lr)) < 1e-9
    # sequences: predict the next symbol of a repeating pattern
    seq = torch.tensor([0, 1, 2, 3, 4, 5, 2, 1] * 4)
    x = torch.nn.functional.one_hot(seq[:-1], 6).to(D).reshape(-1, 1, 6).repeat(1, 2, 1)
    t = seq[1:].reshape(-1, 1).repeat(1, 2)
    lm_batches = [(x, t)]
    flat_ce_ref = lambda y, t: ce_ref(y.reshape(-1, 6), t.reshape(-1))  # noqa: E731
    flat_ce_mine = lambda y, t: ce_mine(y.reshape(-1, 6), t.reshape(-1))  # noqa: E731
    ref_lm, my_lm = TinyLM(torch.nn).double(), TinyLM(nt).double()
    my_lm.load_state_dict(ref_lm.state_dict())
    lr = _train(ref_lm, flat_ce_ref, lm_batches, 80, lr=0.5)
    lm = _train(my_lm, flat_ce_mine, lm_batches, 80, lr=0.5)
    assert lm[-1] < 0.5 * lm[0]
    assert max(abs(a - b) for a, b in zip(lm, lr)) < 1e-9


def test_bad_input_raises_clearly():
    lin = nt.Linear(3, 2)
    with pytest.raises(nnprim.DtypeError, match="dtype torch.int64"):
        lin(torch.ones(2, 3, dtype=torch.int64))
    with pytest.raises(nnprim.DtypeError):
        nt.linear(torch.ones(2, 3, dtype=D), torch.ones(2, 3))  # f64 x with f32 w
    with pytest.raises(nnprim.ShapeError):
        lin(torch.ones(2, 4))
    with pytest.raises(nnprim.InvalidArgumentError, match="empty"):
        lin(torch.ones(0, 3))
    conv = nt.Conv2d(2, 2, 3)
    with pytest.raises(nnprim.InvalidArgumentError, match="expected 3, 4 or 5"):
        nt.conv(torch.ones(2, 3), conv.weight)
    # strided views: the modules take them as torch.nn does (a packed copy where nnprim reads
    # only packed or channels-last layouts); the Context's functions refuse them by name
    x = torch.randn(1, 2, 6, 8, dtype=D)[..., ::2]
    conv.double()
    torch.testing.assert_close(conv(x), torch.nn.functional.conv2d(x, conv.weight, conv.bias),
                               rtol=0, atol=1e-13)
    lstm, ref = nt.LSTM(3, 2).double(), torch.nn.LSTM(3, 2).double()
    lstm.load_state_dict(ref.state_dict())
    xs = torch.randn(4, 2, 6, dtype=D)[..., ::2]
    torch.testing.assert_close(lstm(xs)[0], ref(xs)[0], rtol=0, atol=1e-13)
    with nnprim.Context(backend="ref", env=False) as ctx:
        with pytest.raises(nnprim.UnsupportedError, match="nn_conv_forward: x must be fully "
                           "packed"):
            ctx.conv(x, conv.weight.detach())
    with pytest.raises(nnprim.DtypeError, match="targets dtype float32"):
        nt.cross_entropy(torch.randn(2, 3), torch.tensor([0.0, 1.0]))
    with pytest.raises(NotImplementedError, match="ceil_mode"):
        nt.MaxPool2d(2, ceil_mode=True)


def test_closed_context_and_consumed_pullback_from_python():
    with nnprim.Context(backend="ref", env=False) as ctx:
        x = torch.randn(2, 3, dtype=D)
        w = torch.randn(4, 3, dtype=D)
        y, pb = ctx.linear(x, w, training=True)
    with pytest.raises(nnprim.ClosedError):
        ctx.linear(x, w)
    with pytest.raises(nnprim.ClosedError):
        ctx.linear_backward(pb, torch.ones(2, 4, dtype=D), torch.empty(2, 3, dtype=D))
    gc.collect()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_context_without_gpu_raises():
    with pytest.raises(nnprim.Error) as e:
        nnprim.Context(backend="cudnn", env=False)
    assert e.value.name in ("NN_E_NO_DEVICE", "NN_E_NOT_BUILT")
