"""PyTorch reference for apps/bench/bench_gpu_training.cpp on the same GPU: the
same models (MLP 784-256-128-10 relu; CNN conv5x5-32 relu, pool, conv5x5-64
relu, pool, dense 3136-10), batch sizes and loop (forward, cross-entropy,
backward, SGD step), over a pool of 16 random batches in pinned host memory
copied to the GPU each step, as a DataLoader with pin_memory does.

Both sides compute in FP32: TF32 is switched off for matmuls and cuDNN
(PyTorch's cuDNN default would use it for convolutions). cuDNN may pick
its fastest algorithms (benchmark mode). Unlike troupe's step, this loop
does not read the loss back every step, so it never waits for the GPU
inside the timed loop: PyTorch at its best.

Prints JSON lines; the kernel/copy split comes from torch.profiler over a
separate pass."""
import argparse
import json
import time

import torch


def make_model(name):
    if name == "cnn":
        return torch.nn.Sequential(
            torch.nn.Conv2d(1, 32, 5, padding=2), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(32, 64, 5, padding=2), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Flatten(), torch.nn.Linear(7 * 7 * 64, 10))
    return torch.nn.Sequential(
        torch.nn.Flatten(),
        torch.nn.Linear(784, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 128), torch.nn.ReLU(),
        torch.nn.Linear(128, 10))


def device_ms(prof):
    """(kernel ms, copy ms) of a profile: device time of memcpy activities
    (host <-> device copies) and of everything else on the device (kernels
    and memsets, which troupe's side counts as kernels too)."""
    kernel = copy = 0.0
    for evt in prof.events():
        if getattr(evt, "device_type", None) != torch.autograd.DeviceType.CUDA:
            continue
        us = getattr(evt, "device_time", None)
        if us is None:
            us = getattr(evt, "cuda_time", 0.0)
        name = evt.name.lower()
        if name.startswith("memcpy"):
            copy += us / 1e3
        else:
            kernel += us / 1e3
    return kernel, copy


def measure(name, batch, seconds, dev):
    torch.manual_seed(42)
    model = make_model(name).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    pool = 16
    xs = torch.rand(pool, batch, 1, 28, 28).pin_memory()
    ys = torch.randint(0, 10, (pool, batch)).pin_memory()

    def step(i):
        x = xs[i % pool].to(dev, non_blocking=True)
        y = ys[i % pool].to(dev, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    for i in range(20):
        step(i)
    torch.cuda.synchronize()
    steps, t0, elapsed = 0, time.perf_counter(), 0.0
    while elapsed < seconds:
        for _ in range(20):
            step(steps)
            steps += 1
        torch.cuda.synchronize()
        elapsed = time.perf_counter() - t0
    out = {"impl": "pytorch", "model": name, "batch": batch,
           "samples_per_sec": round(steps * batch / elapsed, 1)}
    profiled = 50
    try:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU,
                                 ProfilerActivity.CUDA]) as prof:
            t0 = time.perf_counter()
            for i in range(profiled):
                step(i)
            torch.cuda.synchronize()
            wall = time.perf_counter() - t0
        kernel, copy = device_ms(prof)
        out.update(step_ms=round(1e3 * wall / profiled, 4),
                   kernel_ms=round(kernel / profiled, 4),
                   copy_ms=round(copy / profiled, 4))
    except Exception as e:  # the profiler needs CUPTI; the speed stands
        out["profile_error"] = str(e)
    out["device"] = torch.cuda.get_device_name(dev)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--models", nargs="+", default=["mlp", "cnn"])
    p.add_argument("--batches", type=int, nargs="+", default=[128, 1024])
    p.add_argument("--device", type=int, default=0)
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda", a.device)
    for name in a.models:
        for batch in a.batches:
            print(json.dumps(measure(name, batch, a.seconds, dev)), flush=True)


if __name__ == "__main__":
    main()
