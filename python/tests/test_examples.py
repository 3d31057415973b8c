"""The examples on the reference backend: the language model's loss falls below 0.8 x the
text's unigram entropy as examples/lstm_lm.c's test requires; the residual CNN's network equals
the same network built from torch.nn, and its script runs."""
import os
import sys

import pytest

torch = pytest.importorskip("torch")
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
sys.path.insert(0, EXAMPLES)
import lstm_lm  # noqa: E402
import resnet_block  # noqa: E402


def test_lstm_lm_learns_like_the_c_example(capsys):
    rc = lstm_lm.main(["--batch", "16", "--seq", "16", "--hidden", "32", "--epochs", "8",
                       "--lr", "2", "--device", "cpu", "--plot", ""])
    out = capsys.readouterr().out
    assert "epoch   7" in out and "below 0.80 x the unigram entropy" in out, out
    assert rc == 0


def test_resnet_block_equals_torch_nn_and_runs(capsys, monkeypatch):
    torch.manual_seed(0)
    mine = resnet_block.SmallResNet(4).double()
    monkeypatch.setattr(resnet_block, "nt", torch.nn)
    ref = resnet_block.SmallResNet(4).double()
    monkeypatch.undo()
    ref.load_state_dict(mine.state_dict())
    x, _ = resnet_block.make_images(6, torch.Generator().manual_seed(2))
    x = x.double().requires_grad_()
    ym, yr = mine(x), ref(x)
    torch.testing.assert_close(ym, yr, rtol=0, atol=1e-12)
    gm = torch.autograd.grad(ym.square().sum(), [x] + list(mine.parameters()))
    gr = torch.autograd.grad(yr.square().sum(), [x] + list(ref.parameters()))
    for a, b in zip(gm, gr):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-11)
    rc = resnet_block.main(["--epochs", "1", "--train", "64", "--test", "32", "--channels", "4",
                            "--device", "cpu", "--require", "0", "--plot", ""])
    assert rc == 0 and "epoch   0  loss" in capsys.readouterr().out


def test_loss_plot_is_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    from _plot import save_loss_plot
    f = tmp_path / "loss.png"
    assert save_loss_plot(str(f), [3.0, 2.5, 2.0], "test", 2.8, "baseline")
    assert f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
