"""Start a Docker cluster, print "ready", and hold it until signalled:
``python tests/runtime/hold_docker_cluster.py RUN_ID IMAGE``."""

from __future__ import annotations

import signal
import sys
import time

from harness.runtime import ClusterSpec
from harness.runtime.docker import DockerRuntime

# Ctrl-C ends it even when started from a background job, which inherits SIGINT ignored
# (a script's `./dev -s docker-tests &`): the test sends SIGINT.
signal.signal(signal.SIGINT, signal.default_int_handler)
run_id, tag = sys.argv[1], sys.argv[2]
with DockerRuntime(image=tag).start(ClusterSpec.of(2, run_id=run_id, tick=0.2)):
    print("ready", flush=True)
    while True:
        time.sleep(1)
