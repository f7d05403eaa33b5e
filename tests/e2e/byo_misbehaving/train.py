"""A SageMaker-style script that misbehaves in a different way at each batch size (test fixture)."""

import argparse
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

ap = argparse.ArgumentParser()
ap.add_argument("--batch-size", type=int, required=True)
ap.add_argument("--epochs", type=int, required=True)
args = ap.parse_args()
bs = args.batch_size

if bs == 9:
    print("cannot open /opt/ml/input/data/train/labels.csv", file=sys.stderr)
    sys.exit(4)  # before its first step
data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
loader = DataLoader(data, batch_size=4 if bs == 11 else bs)  # 11: ignores --batch-size
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(args.epochs):
    for i, (x, y) in enumerate(loader):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        if bs == 10:
            continue  # never steps the optimizer: nothing to time
        if bs == 12:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
        if bs == 13 and i == 2:
            raise ValueError("label 7 out of range")
        opt.zero_grad()
        loss.backward()
        opt.step()
