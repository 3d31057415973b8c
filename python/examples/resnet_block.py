#!/usr/bin/env python3
"""A small ResNet-style CNN through nnprim.torch: a stem convolution, two residual blocks (3x3
convolution, relu, 3x3 convolution, plus the identity shortcut, relu) with max pooling between
them, average pooling and a linear classifier, softmax cross-entropy, SGD with momentum.
The data are generated 16x16 images of a bar, horizontal, vertical or one of the two diagonals,
at a random place with noise: four classes. Prints each epoch's mean loss and the test accuracy;
exits 1 unless the final accuracy reaches --require.

    python3 python/examples/resnet_block.py [--epochs 10] [--batch 32] [--channels 16]
        [--train 1024] [--test 256] [--lr 0.05] [--seed 1] [--device cpu|cuda]
        [--require 0.9] [--plot resnet_block_loss.png]
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # nnprim from this checkout when not installed
import nnprim.torch as nt  # noqa: E402
from _plot import save_loss_plot  # noqa: E402

S = 16  # image side


class ResidualBlock(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nt.Conv2d(c, c, 3, padding=1)
        self.conv2 = nt.Conv2d(c, c, 3, padding=1)
        # the branch starts near zero, so each block starts near the identity (what batch
        # normalisation's zero-initialised scale does in a ResNet; nnprim has no normalisation)
        with torch.no_grad():
            self.conv2.weight.mul_(0.1)

    def forward(self, x):
        return torch.relu(x + self.conv2(torch.relu(self.conv1(x))))


class SmallResNet(torch.nn.Module):
    def __init__(self, c, classes=4):
        super().__init__()
        self.stem = nt.Conv2d(1, c, 3, padding=1)
        self.block1 = ResidualBlock(c)
        self.pool = nt.MaxPool2d(2)
        self.block2 = ResidualBlock(c)
        self.avg = nt.AvgPool2d(S // 2)
        self.fc = nt.Linear(c, classes)

    def forward(self, x):
        x = torch.relu(self.stem(x))
        x = self.pool(self.block1(x))
        x = self.avg(self.block2(x))
        return self.fc(x.flatten(1))


def make_images(n, gen):
    """n images of a bar (length 7) in one of four directions, and the direction as class."""
    labels = torch.randint(0, 4, (n,), generator=gen)
    x = 0.3 * torch.rand(n, 1, S, S, generator=gen)
    steps = {0: (0, 1), 1: (1, 0), 2: (1, 1), 3: (1, -1)}
    for i in range(n):
        dr, dc = steps[int(labels[i])]
        r0 = int(torch.randint(0, S - 7, (1,), generator=gen))
        c0 = int(torch.randint(7 if dc < 0 else 0, S - 7 if dc > 0 else S, (1,), generator=gen))
        for k in range(7):
            x[i, 0, r0 + dr * k, c0 + dc * k] += 1.0
    return x, labels


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--channels", type=int, default=16)
    ap.add_argument("--train", type=int, default=1024)
    ap.add_argument("--test", type=int, default=256)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--require", type=float, default=0.9)
    ap.add_argument("--plot", default="resnet_block_loss.png",
                    help="where to save the loss plot (with matplotlib); '' for none")
    a = ap.parse_args(argv)
    torch.manual_seed(a.seed)
    gen = torch.Generator().manual_seed(a.seed)
    dev = torch.device(a.device)
    xtr, ytr = make_images(a.train, gen)
    xte, yte = make_images(a.test, gen)
    xtr, ytr, xte, yte = xtr.to(dev), ytr.to(dev), xte.to(dev), yte.to(dev)
    model = SmallResNet(a.channels).to(dev)
    loss_fn = nt.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    losses = []
    acc = 0.0
    for epoch in range(a.epochs):
        model.train()
        perm = torch.randperm(a.train, generator=gen).to(dev)
        total, steps = 0.0, 0
        for s in range(0, a.train, a.batch):
            idx = perm[s:s + a.batch]
            loss = loss_fn(model(xtr[idx]), ytr[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.item()
            steps += 1
        losses.append(total / steps)
        model.eval()
        with torch.no_grad():
            acc = float((model(xte).argmax(1) == yte).float().mean())
        print("epoch %3d  loss %.4f  test accuracy %.3f" % (epoch, losses[-1], acc))
        sys.stdout.flush()
    if a.plot and save_loss_plot(a.plot, losses, "nnprim.torch residual CNN"):
        print("loss plot: %s" % a.plot)
    ok = acc >= a.require
    print("final test accuracy %.3f: %s %.2f" % (acc, "reaches" if ok else "DOES NOT reach",
                                                 a.require))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
