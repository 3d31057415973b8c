"""nnprim.torch's LayerNorm on CUDA (the layer-norm kernels of a cuDNN context), float32 and
bfloat16 against torch.nn.LayerNorm; skips without a CUDA device."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device for torch", allow_module_level=True)

import nnprim.torch as nt  # noqa: E402

DEV = torch.device("cuda")


@pytest.mark.parametrize("dtype,tol", [(torch.float32, dict(rtol=1e-5, atol=1e-5)),
                                       (torch.bfloat16, dict(rtol=2e-2, atol=2e-2))])
def test_layer_norm_module_equals_torch_on_cuda(dtype, tol):
    torch.manual_seed(0)
    ref = torch.nn.LayerNorm(768, device=DEV, dtype=dtype)
    mine = nt.LayerNorm(768, device=DEV, dtype=dtype)
    with torch.no_grad():
        ref.weight.uniform_(0.5, 1.5)
        ref.bias.uniform_(-1, 1)
    mine.load_state_dict(ref.state_dict())
    x = torch.randn(4, 128, 768, device=DEV, dtype=dtype, requires_grad=True)
    ym, yr = mine(x), ref(x)
    torch.testing.assert_close(ym, yr, **tol)
    r = torch.randn_like(yr)
    gm = torch.autograd.grad((ym * r).sum(), [x] + list(mine.parameters()))
    gr = torch.autograd.grad((yr * r).sum(), [x] + list(ref.parameters()))
    for a, e in zip(gm, gr):
        # dgamma and dbeta sum 512 rows: torch's float32 sums round more than nnprim's double
        torch.testing.assert_close(a.float(), e.float(), rtol=tol["rtol"] * 10,
                                   atol=tol["atol"] * 50)
