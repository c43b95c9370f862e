"""What PyTorch's RPC parameter servers of the benchmarks share
(bench/pytorch_rpc_ps.py, bench/pytorch_clicks.py --mode rpc): a group of
one server process "ps" (rank 0) and --workers worker processes
("worker1", ...) on 127.0.0.1 with one compute thread each, and the
server's lock and counts, from which samples/s is the pushes' samples
over the time from its first pull to its last push."""
import os
import threading
import time

import torch
import torch.distributed.rpc as rpc


def options(port):
    """Sets this process to one compute thread and the group's meeting
    point to 127.0.0.1:`port`; returns the options to join with."""
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    return rpc.TensorPipeRpcBackendOptions(num_worker_threads=4,
                                           rpc_timeout=600)


def join(rank, workers, rpc_options):
    """Joins this process, rank `rank`, to the group of the server and
    `workers` workers."""
    rpc.init_rpc("ps" if rank == 0 else f"worker{rank}", rank=rank,
                 world_size=workers + 1, rpc_backend_options=rpc_options)


class ServerCounts:
    """A server's lock, which its pulls and pushes hold, and what they
    count: the time of the first pull and of the last push, and the
    pushes."""

    def __init__(self):
        self.lock = threading.Lock()
        self.first_pull = None
        self.last_push = None
        self.pushes = 0

    def pulled(self):
        """A pull, under the lock."""
        if self.first_pull is None:
            self.first_pull = time.perf_counter()

    def pushed(self):
        """A push, under the lock."""
        self.pushes += 1
        self.last_push = time.perf_counter()

    def samples_per_sec(self, batch):
        """The samples of the pushes (`batch` each) over the time from the
        first pull to the last push."""
        seconds = self.last_push - self.first_pull
        return round(self.pushes * batch / seconds, 1)
