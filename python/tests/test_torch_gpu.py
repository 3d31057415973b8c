"""nnprim.torch and the Context on CUDA (cuDNN backend), float32 against torch.nn; every test
skips without a CUDA device."""
import ctypes

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device for torch", allow_module_level=True)

import numpy as np  # noqa: E402

import nnprim  # noqa: E402
import nnprim.torch as nt  # noqa: E402
from nnprim import _abi, _lib  # noqa: E402

DEV = torch.device("cuda")
TOL = dict(rtol=2e-4, atol=2e-5)  # float32, strict fp32 math on both sides, other sum orders


@pytest.fixture(autouse=True)
def strict_fp32():
    torch.manual_seed(0)
    old = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = old


def check(mine, ref, shape, extra=()):
    mine.to(DEV), ref.to(DEV)
    mine.load_state_dict(ref.state_dict())
    x = torch.randn(*shape, device=DEV, requires_grad=True)
    ym, yr = mine(x, *extra), ref(x, *extra)
    ym = ym[0] if isinstance(ym, tuple) else ym
    yr = yr[0] if isinstance(yr, tuple) else yr
    torch.testing.assert_close(ym, yr, **TOL)
    r = torch.randn_like(yr)
    pm, pr = list(mine.parameters()), list(ref.parameters())
    gm = torch.autograd.grad((ym * r).sum(), [x] + pm)
    gr = torch.autograd.grad((yr * r).sum(), [x] + pr)
    for a, b in zip(gm, gr):
        torch.testing.assert_close(a, b, **TOL)


def test_modules_equal_torch_on_cuda():
    check(nt.Linear(32, 16), torch.nn.Linear(32, 16), (8, 32))
    check(nt.Conv2d(8, 16, 3, padding=1), torch.nn.Conv2d(8, 16, 3, padding=1), (4, 8, 12, 12))
    check(nt.Conv1d(4, 4, 5, stride=2, groups=2), torch.nn.Conv1d(4, 4, 5, stride=2, groups=2),
          (2, 4, 17))
    check(nt.Conv3d(2, 4, 3, padding=1), torch.nn.Conv3d(2, 4, 3, padding=1), (1, 2, 5, 6, 5))
    check(nt.LSTM(16, 32, num_layers=2), torch.nn.LSTM(16, 32, num_layers=2), (10, 4, 16))
    check(nt.LSTM(8, 16, bidirectional=True, batch_first=True, proj_size=8),
          torch.nn.LSTM(8, 16, bidirectional=True, batch_first=True, proj_size=8), (3, 7, 8))
    check(nt.GRU(8, 16, num_layers=2), torch.nn.GRU(8, 16, num_layers=2), (6, 3, 8))
    check(nt.RNN(8, 16, nonlinearity="relu"), torch.nn.RNN(8, 16, nonlinearity="relu"),
          (6, 3, 8))
    x = torch.randn(2, 3, 8, 8, device=DEV, requires_grad=True)
    for mine, ref in ((nt.MaxPool2d(2), torch.nn.MaxPool2d(2)),
                      (nt.AvgPool2d(3, 1, 1), torch.nn.AvgPool2d(3, 1, 1))):
        torch.testing.assert_close(mine(x), ref(x), **TOL)
        gm, = torch.autograd.grad(mine(x).sum(), x)
        gr, = torch.autograd.grad(ref(x).sum(), x)
        torch.testing.assert_close(gm, gr, **TOL)
    x, t = torch.randn(16, 10, device=DEV, requires_grad=True), torch.randint(0, 10, (16,),
                                                                              device=DEV)
    lm, lr = nt.CrossEntropyLoss()(x, t), torch.nn.CrossEntropyLoss()(x, t)
    torch.testing.assert_close(lm, lr, **TOL)
    torch.testing.assert_close(torch.autograd.grad(lm, x)[0], torch.autograd.grad(lr, x)[0],
                               **TOL)


def test_runs_on_torch_current_stream_and_allocates_through_torch():
    s = torch.cuda.Stream()
    m, r = nt.LSTM(16, 32).to(DEV), torch.nn.LSTM(16, 32).to(DEV)
    m.load_state_dict(r.state_dict())
    x = torch.randn(20, 8, 16, device=DEV, requires_grad=True)
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        y = m(x)[0]
        assert nt.context(DEV).stream == s.cuda_stream
        y.sum().backward()
    s.synchronize()
    torch.testing.assert_close(y, r(x)[0], **TOL)
    st = _abi.nn_mem_stats()
    _lib.load().call("nn_mem_get_stats", torch.cuda.current_device(), ctypes.byref(st))
    assert st.user_allocator != 0 and st.user_alloc_total > 0


def test_dlpack_zero_copy_both_ways():
    with nnprim.Context(backend="cudnn", env=False) as ctx:
        a = torch.arange(12, dtype=torch.float32, device=DEV).reshape(3, 4)
        v = ctx.from_dlpack(a)
        assert v.data_ptr == a.data_ptr() and v.on_device and v.shape == (3, 4)
        t = ctx.full((2, 5), 3.0)
        b = torch.from_dlpack(t)
        assert b.data_ptr() == t.data_ptr and b.is_cuda and (b == 3.0).all()
        del b


def test_cpu_memory_to_a_cudnn_context_raises():
    with nnprim.Context(backend="cudnn", env=False) as ctx:
        with pytest.raises(nnprim.MemorySpaceError):
            ctx.from_dlpack(np.ones((2, 2), np.float32))
        with pytest.raises(nnprim.MemorySpaceError):
            ctx.linear(np.ones((2, 3), np.float32), torch.ones(4, 3, device=DEV))
    with pytest.raises(nnprim.MemorySpaceError, match="expected one device"):
        nt.linear(torch.ones(2, 3, device=DEV), torch.ones(4, 3))


def test_plan_cache_save_and_load(tmp_path):
    f = tmp_path / "plans.bin"
    x = torch.randn(2, 4, 9, 9, device=DEV)
    w = torch.randn(8, 4, 3, 3, device=DEV)
    with nnprim.Context(backend="cudnn", env=False) as ctx:
        ctx.conv(x, w, padding=1)
        ctx.synchronize()
        ctx.plan_cache_save(f)
    assert f.stat().st_size > 0
    with nnprim.Context(backend="cudnn", env=False) as ctx:
        ctx.plan_cache_load(f)
        assert ctx.plan_cache_stats()["records_loaded"] > 0


def test_small_model_trains_on_cuda_like_torch():
    g = torch.Generator(device=DEV).manual_seed(1)
    x = torch.randn(64, 1, 8, 8, device=DEV, generator=g)
    t = (x.mean(dim=(1, 2, 3)) > 0).long()
    models = []
    for lib in (torch.nn, nt):
        models.append(torch.nn.Sequential(lib.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(),
                                          lib.MaxPool2d(2), torch.nn.Flatten(),
                                          lib.Linear(8 * 16, 2)).to(DEV))
    models[1].load_state_dict(models[0].state_dict())
    losses = []
    for m, ce in zip(models, (torch.nn.CrossEntropyLoss(), nt.CrossEntropyLoss())):
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        run = []
        for _ in range(40):
            opt.zero_grad()
            loss = ce(m(x), t)
            loss.backward()
            opt.step()
            run.append(loss.item())
        losses.append(run)
    assert losses[1][-1] < 0.5 * losses[1][0]
    assert max(abs(a - b) for a, b in zip(*losses)) < 1e-3


def test_float64_on_cuda_matches_torch_closely():
    # cuDNN's recurrent and cuBLASLt's f64 paths: the parity tolerance of docs/PARITY.md (1e-8)
    tol = dict(rtol=0, atol=1e-8)
    for mine, ref, shape in ((nt.LSTM(6, 8, num_layers=2), torch.nn.LSTM(6, 8, num_layers=2),
                              (5, 3, 6)),
                             (nt.GRU(6, 8, bidirectional=True),
                              torch.nn.GRU(6, 8, bidirectional=True), (5, 3, 6)),
                             (nt.Linear(6, 8), torch.nn.Linear(6, 8), (4, 6))):
        mine.to(DEV, torch.float64), ref.to(DEV, torch.float64)
        mine.load_state_dict(ref.state_dict())
        x = torch.randn(*shape, device=DEV, dtype=torch.float64, requires_grad=True)
        ym, yr = mine(x), ref(x)
        ym = ym[0] if isinstance(ym, tuple) else ym
        yr = yr[0] if isinstance(yr, tuple) else yr
        torch.testing.assert_close(ym, yr, **tol)
        gm = torch.autograd.grad(ym.sum(), [x] + list(mine.parameters()))
        gr = torch.autograd.grad(yr.sum(), [x] + list(ref.parameters()))
        for a, b in zip(gm, gr):
            torch.testing.assert_close(a, b, **tol)


def test_cross_entropy_reads_cuda_targets_on_the_device():
    """nnprim.torch's contexts read CUDA targets on the device (xent_targets="device"): the
    loss equals torch's; a target out of range gives NaN in its sample, as no host check runs;
    a Context left at "checked" refuses it."""
    x = torch.randn(6, 5, device=DEV, requires_grad=True)
    t = torch.tensor([0, 4, 2, 1, 3, 0], device=DEV)
    got = nt.cross_entropy(x, t, reduction="none")
    torch.testing.assert_close(got, torch.nn.functional.cross_entropy(x, t, reduction="none"),
                               **TOL)
    bad = t.clone()
    bad[2] = 5
    loss = nt.cross_entropy(x, bad, reduction="none")
    assert torch.isnan(loss[2]) and not torch.isnan(loss[[0, 1, 3, 4, 5]]).any()
    with nnprim.Context(backend="cudnn", env=False) as ctx:
        assert ctx.cross_entropy(x.detach(), t) is not None
        with pytest.raises(nnprim.InvalidArgumentError, match=r"targets\[2\]"):
            ctx.cross_entropy(x.detach(), bad)
