"""PyTorch reference for apps/bench/bench_cpu_training.cpp: the same MLPs, batch
sizes and thread counts, the same loop (forward, cross-entropy, backward,
SGD step) over a pool of pre-made random batches. Prints JSON lines."""
import argparse
import json
import time

import torch


def measure(hidden, act, batch, threads, seconds):
    torch.set_num_threads(threads)
    torch.manual_seed(42)
    layers, width = [], 784
    for h in hidden:
        layers += [torch.nn.Linear(width, h),
                   torch.nn.Sigmoid() if act == "sigmoid" else torch.nn.ReLU()]
        width = h
    layers.append(torch.nn.Linear(width, 10))
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    return samples_per_sec(model, opt, torch.rand(16, batch, 784), seconds,
                           chunk=50)


def samples_per_sec(model, opt, xs, seconds, chunk):
    """The loop both benchmarks time: forward, cross-entropy, backward and
    the optimizer's step over the pre-made batches xs (with random labels),
    `chunk` steps between clock reads, after 2 * chunk warm-up steps."""
    loss_fn = torch.nn.CrossEntropyLoss()
    pool, batch = xs.shape[0], xs.shape[1]
    ys = torch.randint(0, 10, (pool, batch))

    def step(i):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xs[i % pool]), ys[i % pool])
        loss.backward()
        opt.step()

    for i in range(2 * chunk):
        step(i)
    steps, t0 = 0, time.perf_counter()
    elapsed = 0.0
    while elapsed < seconds:
        for _ in range(chunk):
            step(steps)
            steps += 1
        elapsed = time.perf_counter() - t0
    return steps * batch / elapsed


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=1.0)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--kernels", default="?")
    a = p.parse_args()
    for hidden, act in (([100], "sigmoid"), ([256, 128], "relu")):
        name = "-".join(str(x) for x in [784] + hidden + [10]) + " " + act
        for batch in (100, 128):
            for t in a.threads:
                sps = measure(hidden, act, batch, t, a.seconds)
                print(json.dumps({"impl": "pytorch", "kernels": a.kernels,
                                  "model": name, "batch": batch, "threads": t,
                                  "samples_per_sec": round(sps, 1)}),
                      flush=True)


if __name__ == "__main__":
    main()
