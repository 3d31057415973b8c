#!/usr/bin/env python3
"""examples/lstm_lm.c's character-level language model through nnprim.torch: one-hot characters
-> 2-layer LSTM -> linear -> softmax cross-entropy (mean) against the next character, SGD with
momentum. Random windows of a text (examples/data/tiny.txt by default); an epoch is as many steps
as the text has windows of N x T characters. Prints each epoch's mean loss next to the text's
unigram entropy (the loss of the best model that ignores context) and exits 1 unless the last
epoch's loss is below --require times it, as the C example does.

    python3 python/examples/lstm_lm.py [--text PATH] [--batch 32] [--seq 32] [--hidden 128]
        [--layers 2] [--epochs 100] [--lr 1] [--momentum 0.9] [--seed 1] [--device cpu|cuda]
        [--require 0.8] [--plot lstm_lm_loss.png]

The defaults are the C example's, sized for a GPU; on the CPU (the reference backend)
--batch 16 --seq 16 --hidden 32 --epochs 8 --lr 2 runs in seconds, as its test does.
"""
import argparse
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # nnprim from this checkout when not installed
import nnprim.torch as nt  # noqa: E402
from _plot import save_loss_plot  # noqa: E402


class LanguageModel(torch.nn.Module):
    def __init__(self, vocab, hidden, layers):
        super().__init__()
        self.vocab = vocab
        self.lstm = nt.LSTM(vocab, hidden, num_layers=layers)
        self.head = nt.Linear(hidden, vocab)

    def forward(self, x):  # x: T x N x V one-hot
        y, _ = self.lstm(x)
        return self.head(y)  # T x N x V logits


def load_text(path):
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 2:
        sys.exit("%s: cannot load a text of 2 characters or more" % path)
    chars = sorted(set(raw))
    ids = {c: i for i, c in enumerate(chars)}
    sym = torch.tensor([ids[c] for c in raw])
    counts = torch.bincount(sym).double()
    p = counts / len(raw)
    return sym, len(chars), float(-(p * p.log()).sum())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--text", default=os.path.join(HERE, "..", "..", "examples", "data",
                                                   "tiny.txt"))
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--lr", type=float, default=1.0)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--require", type=float, default=0.8)
    ap.add_argument("--plot", default="lstm_lm_loss.png",
                    help="where to save the loss plot (with matplotlib); '' for none")
    a = ap.parse_args(argv)
    torch.manual_seed(a.seed)
    dev = torch.device(a.device)
    sym, vocab, entropy = load_text(a.text)
    print("text %s: %d characters, vocabulary %d, unigram entropy %.4f nats/char" %
          (a.text, len(sym), vocab, entropy))
    model = LanguageModel(vocab, a.hidden, a.layers).to(dev)
    loss_fn = nt.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    steps = max(1, len(sym) // (a.batch * a.seq))
    offsets = torch.arange(a.seq + 1)
    losses = []
    for epoch in range(a.epochs):
        total = 0.0
        for _ in range(steps):
            start = torch.randint(0, len(sym), (a.batch,))
            win = sym[(start[None, :] + offsets[:, None]) % len(sym)].to(dev)  # (T+1) x N
            x = torch.nn.functional.one_hot(win[:-1], vocab).float()
            logits = model(x)
            loss = loss_fn(logits.reshape(-1, vocab), win[1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.item()
        losses.append(total / steps)
        print("epoch %3d  loss %.4f nats/char  (%.3f of the unigram entropy)" %
              (epoch, losses[-1], losses[-1] / entropy))
        sys.stdout.flush()
    if a.plot and save_loss_plot(a.plot, losses, "nnprim.torch LSTM language model", entropy,
                                 "unigram entropy"):
        print("loss plot: %s" % a.plot)
    ok = losses[-1] < a.require * entropy
    print("final loss %.4f: %s %.2f x the unigram entropy (%.4f)" %
          (losses[-1], "below" if ok else "NOT below", a.require, a.require * entropy))
    return 0 if ok and math.isfinite(losses[-1]) else 1


if __name__ == "__main__":
    sys.exit(main())
