#!/usr/bin/env python3
"""Distributed synchronous SGD, the tutorials' training example: the data set is partitioned
across the ranks, each rank trains the same model on its part with a batch of 128 / world size,
and after every backward pass the ranks average their gradients with all_reduce (SUM, then a
division by the world size), so every rank takes the same step and the models stay identical.
Each rank prints its mean loss per epoch, as the tutorial does.

The tutorial trains a small convolutional net on MNIST; nothing is downloaded here: the data set
is generated (10 classes of points around fixed random centres in 20 dimensions) and the model is
a small multi-layer perceptron.

    python3 examples/python/sgd.py
"""
import math
import random

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, Subset, TensorDataset

from launch import launch

FEATURES, CLASSES, SAMPLES, GLOBAL_BATCH, EPOCHS = 20, 10, 2048, 128, 10


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(FEATURES, 64)
        self.out = nn.Linear(64, CLASSES)

    def forward(self, x):
        return F.log_softmax(self.out(F.relu(self.hidden(x))), dim=1)


def make_data_set():
    """The same points on every rank: a fixed generator, not the global random state."""
    generator = torch.Generator().manual_seed(2026)
    centres = 2.0 * torch.randn(CLASSES, FEATURES, generator=generator)
    labels = torch.randint(0, CLASSES, (SAMPLES,), generator=generator)
    points = centres[labels] + torch.randn(SAMPLES, FEATURES, generator=generator)
    return TensorDataset(points, labels)


def partition_dataset(rank, size):
    """This rank's share of a shuffle every rank makes alike, and its loader (shuffled per epoch
    by a generator seeded with the rank)."""
    data = make_data_set()
    order = list(range(len(data)))
    random.Random(1234).shuffle(order)
    share = len(order) // size
    mine = Subset(data, order[rank * share:(rank + 1) * share])
    batch = GLOBAL_BATCH // size
    loader = DataLoader(mine, batch_size=batch, shuffle=True, generator=torch.Generator().manual_seed(rank))
    return loader, batch


def average_gradients(model):
    size = float(dist.get_world_size())
    for param in model.parameters():
        dist.all_reduce(param.grad.data, op=dist.ReduceOp.SUM)
        param.grad.data /= size


def run(rank, size):
    torch.manual_seed(1234)
    train_set, batch = partition_dataset(rank, size)
    model = Net()
    optimizer = optim.SGD(model.parameters(), lr=0.01, momentum=0.5)
    num_batches = math.ceil(len(train_set.dataset) / float(batch))
    for epoch in range(EPOCHS):
        epoch_loss = 0.0
        for data, target in train_set:
            optimizer.zero_grad()
            loss = F.nll_loss(model(data), target)
            epoch_loss += loss.item()
            loss.backward()
            average_gradients(model)
            optimizer.step()
        print("Rank ", dist.get_rank(), ", epoch ", epoch, ": ", epoch_loss / num_batches, flush=True)


if __name__ == "__main__":
    launch(run)
