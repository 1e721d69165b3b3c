"""How long a ``gnau`` command takes as a whole process, beside ``python -c pass``.

Run: ``.venv/bin/python bench/bench_cli_startup.py [--runs N]`` (about half a minute).
Each command runs as an operator runs it (the installed ``gnau`` script, a fresh process), N
times, in rounds that alternate with the baseline (an interpreter that does nothing), so the
machine's noise hits both alike: compare the ratio more than the milliseconds. Wall time is
the child's life as the parent sees it, CPU its user + system time; each is the median of the
runs. A client command calls a port of this benchmark's, which accepts the connection and no
more: its wall time is until it dials (the connection accepted), and the process is then
killed (its CPU is counted to then), so no service's answer and no retry is measured.

Targets (issue 20): ``--version`` and ``--help`` under 150 ms, a client command under 400 ms.
"""

from __future__ import annotations

import argparse
import os
import resource
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

GNAU = str(Path(sys.executable).with_name("gnau"))
BASELINE_LABEL = "python -c pass"


@dataclass(frozen=True)
class Command:
    label: str
    argv: tuple[str, ...]
    target: float | None = None  # seconds
    dials: bool = False  # a client command: timed until it dials
    env: tuple[tuple[str, str], ...] = ()  # added to the environment


def commands(scratch: Path, service: str) -> list[Command]:
    client = ("--target", service)
    token = ("--token", "bench-token")
    out = ("--out", str(scratch / "bundle.jsonl"))
    return [
        Command("gnau --version", (GNAU, "--version"), 0.15),
        Command("gnau --help", (GNAU, "--help"), 0.15),
        Command("gnau evaluate 3C 6S 8H 4H 8C", (GNAU, "evaluate", "3C", "6S", "8H", "4H", "8C")),
        Command("gnau health", (GNAU, "health", *client), 0.4, dials=True),
        Command(
            "gnau health (the probe: GNAU_LISTEN, no --target)",
            (GNAU, "health"),
            0.4,
            dials=True,
            env=(("GNAU_LISTEN", f"0.0.0.0:{service.rsplit(':', 1)[1]}"),),
        ),
        Command("gnau round get", (GNAU, "round", "get", "r-1", *client), 0.4, dials=True),
        Command("gnau receipt get", (GNAU, "receipt", "get", "r-1", *client), 0.4, dials=True),
        Command("gnau audit export", (GNAU, "audit", "export", *client, *token, *out), 0.4, True),
        Command("gnau audit show", (GNAU, "audit", "show", *client, *token), 0.4, dials=True),
        Command("gnau play", (GNAU, "play", *client, *token), 0.4, dials=True),
        Command("gnau serve --help", (GNAU, "serve", "--help")),
    ]


def timed(command: Command, env: dict[str, str], listener: socket.socket) -> tuple[float, float]:
    """The wall and CPU seconds of one run of ``command``: to its end, or to its dialling."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    child = subprocess.Popen(
        command.argv,
        env={**env, **dict(command.env)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    if command.dials:
        while not select.select([listener], [], [], 0.005)[0]:
            if child.poll() is not None:
                raise SystemExit(f"{command.label} exited {child.returncode} before dialling")
        wall = time.perf_counter() - began
        child.kill()
        child.wait()
        listener.accept()[0].close()
    else:
        child.wait()
        wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="runs of each command")
    args = parser.parse_args()
    # No GNAU_* from the environment: a GNAU_TARGET would send the client commands elsewhere.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GNAU_")}
    with tempfile.TemporaryDirectory() as directory, socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        measured = commands(Path(directory), f"127.0.0.1:{listener.getsockname()[1]}")
        baseline = Command(BASELINE_LABEL, (sys.executable, "-c", "pass"))
        for command in measured:  # warm the file cache (and the bytecode) once
            timed(command, env, listener)
        samples: dict[Command, list[tuple[float, float]]] = {c: [] for c in [baseline, *measured]}
        for _ in range(args.runs):
            for command in measured:
                samples[baseline].append(timed(baseline, env, listener))
                samples[command].append(timed(command, env, listener))
    base_wall = statistics.median(wall for wall, _ in samples[baseline])
    print(f"{args.runs} runs of each command, the baseline between every two; medians.\n")
    print("| command | wall ms | CPU ms | wall / baseline | target ms | |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for command in [baseline, *measured]:
        wall = statistics.median(w for w, _ in samples[command])
        cpu = statistics.median(c for _, c in samples[command])
        target = command.target
        verdict = "" if target is None else ("under" if wall < target else "OVER")
        shown = "" if target is None else f"{target * 1000:.0f}"
        print(
            f"| `{command.label}` | {wall * 1000:.0f} | {cpu * 1000:.0f} | "
            f"{wall / base_wall:.1f} | {shown} | {verdict} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
