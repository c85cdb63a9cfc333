"""The eval benchmark's Jupyter peer, run inside the sandbox.

Starts one IPython kernel (python3-ipykernel) with jupyter_client, then times
`1+1` through the Jupyter protocol over ZMQ: execute_request on the shell
channel until both its execute_reply and the iopub status idle for it have
arrived, checking the execute_result is 2. Prints one JSON object:
{"start_ms": ..., "samples_ms": [...], "versions": {...}}.

Usage: python3 jupyter_peer.py WARMUP TRIPS
"""
import json
import sys
import time

import ipykernel
import jupyter_client
from jupyter_client.manager import start_new_kernel

TIMEOUT = 30  # seconds any one message may take


def trip(kc):
    msg_id = kc.execute("1+1", store_history=False)
    result, idle, reply = None, False, None
    deadline = time.monotonic() + TIMEOUT
    while not idle:
        m = kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        if m["parent_header"].get("msg_id") != msg_id:
            continue
        kind = m["msg_type"]
        if kind == "execute_result":
            result = m["content"]["data"].get("text/plain")
        elif kind == "status" and m["content"]["execution_state"] == "idle":
            idle = True
    while reply is None:
        m = kc.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
        if m["parent_header"].get("msg_id") == msg_id:
            reply = m
    if reply["content"]["status"] != "ok" or result != "2":
        raise SystemExit("1+1 answered %r (status %s)" % (result, reply["content"]["status"]))


def main():
    warm, trips = int(sys.argv[1]), int(sys.argv[2])
    t0 = time.perf_counter()
    km, kc = start_new_kernel(kernel_name="python3", startup_timeout=TIMEOUT)
    try:
        trip(kc)  # the first answer ends the start
        start = time.perf_counter() - t0
        for _ in range(warm):
            trip(kc)
        samples = []
        for _ in range(trips):
            t = time.perf_counter()
            trip(kc)
            samples.append((time.perf_counter() - t) * 1000)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    json.dump({"start_ms": start * 1000, "samples_ms": samples,
               "versions": {"ipykernel": ipykernel.__version__, "jupyter_client": jupyter_client.__version__}}, sys.stdout)


if __name__ == "__main__":
    main()
