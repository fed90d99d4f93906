"""Which runtime a scenario's cluster runs in, for the broker it targets."""

from __future__ import annotations

from typing import cast

from harness.run.outcome import HarnessError
from harness.runtime import Runtime

# The runtimes each broker can run in: RabbitMQ only in containers (its nodes find
# each other by host name, which only a network of their own gives them).
TARGET_RUNTIMES = {"mirrorchaos": ("process", "docker"), "rabbitmq": ("docker",)}


def make_runtime(name: str, *, target: str = "mirrorchaos", loses_power: bool = False) -> Runtime:
    """``loses_power``: the scenario can lose unsynced writes, so local nodes keep their
    data on lazyfs where FUSE works."""
    # cast: the runtimes' ``__enter__`` is typed as their base class, not as `Cluster`.
    if name not in TARGET_RUNTIMES[target]:
        raise HarnessError(f"the {target} target runs in {' or '.join(TARGET_RUNTIMES[target])}, "
                           f"not {name}")
    if target == "rabbitmq":
        from harness.runtime.rabbitmq import RabbitMQRuntime
        return cast(Runtime, RabbitMQRuntime())
    if name == "process":
        from harness.runtime.process import ProcessRuntime
        return cast(Runtime, ProcessRuntime(lazyfs=None if loses_power else False))
    try:
        from harness.runtime.docker import DockerRuntime  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        raise HarnessError(f"the docker runtime is not available here: {exc}") from None
    return cast(Runtime, DockerRuntime())
