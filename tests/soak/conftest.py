"""One Spark session for the soak tests (start-up takes seconds)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark", reason="the soak extra (pyspark) is not installed")
    from reports.soak.spark import spark_session

    session = spark_session("local[2]", app="mirrorchaos-soak-tests")
    yield session
    session.stop()
