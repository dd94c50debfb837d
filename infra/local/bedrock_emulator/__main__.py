"""The Bedrock emulator in a process of its own: `python -m infra.local.bedrock_emulator [--port N] [--chunk-delay S]`.

Prints `Bedrock emulator: <url>` once it listens, then serves until it is stopped (SIGTERM or
Ctrl-C). The benchmark runs it so, out of the measured process, so none of its work is counted as
ours (infra/bench/benchmark/model_process.py).
"""

import argparse
import signal
import sys
import threading

from infra.local.bedrock_emulator.server import BedrockEmulator


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    parser.add_argument("--chunk-delay", type=float, default=0.0, help="seconds before each streamed chunk")
    args = parser.parse_args(argv)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    signal.signal(signal.SIGINT, lambda *_: stopped.set())
    with BedrockEmulator(host=args.host, port=args.port, chunk_delay_s=args.chunk_delay) as emulator:
        print(f"Bedrock emulator: {emulator.url}", flush=True)
        stopped.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
