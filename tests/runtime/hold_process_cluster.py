"""Start a process-runtime cluster (on lazyfs where FUSE works, so the reaper's test sees
the mounts too), print "ready", and hold it until killed:
``python tests/runtime/hold_process_cluster.py``."""

from __future__ import annotations

import time

from harness.runtime import ClusterSpec
from harness.runtime.process import ProcessRuntime

with ProcessRuntime(lazyfs=None).start(ClusterSpec.of(2, tick=0.2)):
    print("ready", flush=True)
    while True:
        time.sleep(1)
