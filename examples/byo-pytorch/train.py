"""Train a small CNN classifier: a plain PyTorch script, written as for SageMaker's PyTorch estimator.

Hyperparameters arrive as arguments (--batch-size, --epochs, --lr ...), paths from SageMaker's
environment (SM_CHANNEL_TRAIN, SM_MODEL_DIR). Data: ``train.npz`` in the train channel (arrays ``x``
of shape N x 1 x 28 x 28 and ``y`` of labels); without a channel, a generated dataset of the same shape.
"""

import argparse
import os
import time

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--samples", type=int, default=16384, help="generated dataset size")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train", default=os.environ.get("SM_CHANNEL_TRAIN"))
    parser.add_argument("--model-dir", default=os.environ.get("SM_MODEL_DIR", "model"))
    return parser.parse_args()


def load_data(args):
    path = os.path.join(args.train, "train.npz") if args.train else None
    if path and os.path.isfile(path):
        arrays = np.load(path)
        x, y = torch.from_numpy(arrays["x"]).float(), torch.from_numpy(arrays["y"]).long()
    else:
        # ten classes, each a noisy copy of its own random template
        g = torch.Generator().manual_seed(args.seed)
        templates = torch.randn(10, 1, 28, 28, generator=g)
        y = torch.randint(0, 10, (args.samples,), generator=g)
        x = templates[y] + 1.5 * torch.randn(args.samples, 1, 28, 28, generator=g)
    split = int(0.9 * len(x))
    return TensorDataset(x[:split], y[:split]), TensorDataset(x[split:], y[split:])


def build_model():
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * 7 * 7, 10),
    )  # fmt: skip


def evaluate(model, loader, device):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            correct += (model(x).argmax(1) == y).sum().item()
            total += len(y)
    return correct / max(total, 1)


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train_set, test_set = load_data(args)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
    test_loader = DataLoader(test_set, batch_size=256)
    model = build_model().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(1, args.epochs + 1):
        model.train()
        start = time.time()
        for x, y in train_loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
        accuracy = evaluate(model, test_loader, device)
        print(f"epoch {epoch}: loss {loss.item():.4f}, accuracy {accuracy:.4f}, {time.time() - start:.1f}s")
    os.makedirs(args.model_dir, exist_ok=True)
    torch.save(model.state_dict(), os.path.join(args.model_dir, "model.pt"))


if __name__ == "__main__":
    main()
