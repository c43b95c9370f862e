"""One node of the DLRM-style example (examples/pytorch_dlrm/train.py
node CONFIG NODE), its steps timed: on a worker's node, once the run
ends, one JSON line with the steps, the mean time in the step function,
the mean and median time between one step's return and the next one's
call (what a step waits for its lease, values and rows), and the rows its
steps pulled and pushed (each table's distinct keys, twice) per second of
the worker's time from its first step to its last.

  /usr/bin/python3 bench/dlrm_node_timed.py node CONFIG NODE
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "examples", "pytorch_dlrm"))
import train  # noqa: E402
import troupe  # noqa: E402

run_node = troupe.run_node


def timed_run_node(config, node, step, **kw):
    spent, gaps, rows, last, first = [], [], [0], [None], [None]

    def timed(params, samples, tables):
        began = time.perf_counter()
        if last[0] is not None:
            gaps.append(began - last[0])
        if first[0] is None:
            first[0] = began
        result = step(params, samples, tables)
        rows[0] += 2 * sum(len(r.unique) for r in tables.values())
        last[0] = time.perf_counter()
        spent.append(last[0] - began)
        return result
    try:
        return run_node(config, node, timed if node.startswith("w") else step,
                        **kw)
    finally:
        if spent:
            gaps.sort()
            seconds = last[0] - first[0]
            print(json.dumps({
                "node": node, "steps": len(spent),
                "step_ms": round(1000 * sum(spent) / len(spent), 3),
                "wait_ms_mean": round(1000 * sum(gaps) / max(len(gaps), 1),
                                      3),
                "wait_ms_median": round(1000 * gaps[len(gaps) // 2], 3)
                if gaps else 0,
                "rows_per_sec": round(rows[0] / seconds, 1)}), flush=True)


troupe.run_node = timed_run_node
sys.argv = [train.__file__] + sys.argv[1:]
train.main()
