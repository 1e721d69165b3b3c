"""The garbage collector's settings for a serving process (server/process/gc_tuning.py)."""

import json
import subprocess
import sys

from gnau_service.server.process.gc_tuning import YOUNGEST_THRESHOLD


def test_a_started_server_freezes_its_start_up_and_collects_the_young_less_often() -> None:
    # In a child process: freezing this test process's objects would change every later test.
    script = (
        "import gc, json\n"
        "from gnau_service.server.process import app, gc_tuning\n"
        "before = (gc.get_freeze_count(), gc.get_threshold())\n"
        "gc_tuning.settle_after_start()\n"
        "print(json.dumps([before, (gc.get_freeze_count(), gc.get_threshold())]))\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    (frozen_before, threshold_before), (frozen_after, threshold_after) = json.loads(child.stdout)
    assert frozen_before == 0
    assert frozen_after > 10_000  # the modules, grpc's and protobuf's objects, at the least
    assert threshold_before[0] == 700  # CPython's default
    assert threshold_after == [YOUNGEST_THRESHOLD, *threshold_before[1:]]
