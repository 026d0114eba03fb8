"""llama.cpp's own OpenAI-compatible server with a GGUF model: run by the model venv's python (`make model`),
not the project's, since xllamacpp lives only there. tests/support/models/llama_server.py starts it as a child.

xllamacpp's `Server` starts llama.cpp's HTTP server (cpp-httplib, the same code as `llama-server`) in
threads of this process; this script only sets its parameters, then waits for SIGTERM or SIGINT.
Usage: python llama_serve.py MODEL PORT --ctx N --threads N --n-predict N
"""

from __future__ import annotations

import argparse
import signal
import sys

import xllamacpp  # the model venv's (`make model`), not the project's


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("port", type=int)
    parser.add_argument("--ctx", type=int, required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--n-predict", type=int, required=True)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.n_ctx = args.ctx
    params.n_parallel = 1  # one slot: missions run one at a time, and the whole context is that slot's
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.n_predict = args.n_predict  # the server's own ceiling on a reply, whatever a request asks
    params.sampling.seed = args.seed
    params.use_jinja = True  # the model's own chat template (Gemma 3's), as `llama-server --jinja`
    server = xllamacpp.Server(params)
    # after the server, which installs handlers of its own that stop its loop but not this process
    for stop in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop, lambda number, frame: sys.exit(0))
    print(f"listening on {server.listening_address}", flush=True)
    while True:
        signal.pause()


if __name__ == "__main__":
    main()
