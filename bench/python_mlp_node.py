"""One node of a troupe cluster whose workers train bench/pytorch_rpc_ps.py's
MLP (784-100-10, ReLU, He init, images in [0, 1]) in a PyTorch step
function: the Python-worker side of scripts/bench-python-mlp.sh. The node
that holds no workers (the chief's) evaluates on the test set with the same
model.

  PYTHONPATH=build/python /usr/bin/python3 bench/python_mlp_node.py \\
      --config CLUSTER.json --node NAME --key KEY --data DIR [--hidden 100]
"""
import argparse
import os
import sys

import torch

import troupe
from pytorch_rpc_ps import load, make_model


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--config", required=True)
    p.add_argument("--node", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--hidden", type=int, default=100)
    a = p.parse_args()
    torch.set_num_threads(1)  # one core per worker process, as the RPC side
    model = make_model(a.hidden, 1)
    tensors = dict(model.named_parameters())

    def take(params):
        with torch.no_grad():
            for name, t in tensors.items():
                t.copy_(torch.from_numpy(params[name]))

    def step(params, samples):
        take(params)
        i = torch.from_numpy(samples)
        out = model(x[i])
        loss = torch.nn.functional.cross_entropy(out, y[i])
        grads = torch.autograd.grad(loss, list(tensors.values()))
        hits = (out.argmax(1) == y[i]).sum().item()
        return dict(zip(tensors, grads)), loss.item() * len(i), hits

    def evaluate(params):
        take(params)
        with torch.no_grad():
            out = model(xt)
            loss = torch.nn.functional.cross_entropy(out, yt).item()
            acc = (out.argmax(1) == yt).float().mean().item()
        return acc, loss, len(yt)

    chief = a.node == "ps"
    if chief:
        xt, yt = load(a.data, "t10k")
    else:
        x, y = load(a.data, "train")
    sys.exit(troupe.run_node(a.config, a.node,
                             (lambda p, s: None) if chief else step,
                             evaluate=evaluate if chief else None,
                             key=a.key))


if __name__ == "__main__":
    main()
