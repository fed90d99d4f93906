"""How many examples a property test draws: each test names its full count, the default
run draws a share of it (the suite stays within CI's ten minutes on a busy machine) and
the `thorough` nox session, with MIRRORCHAOS_EXAMPLES=all, draws it all."""

from __future__ import annotations

import os

DEFAULT_SHARE = 0.35
SHARE = 1.0 if os.environ.get("MIRRORCHAOS_EXAMPLES") == "all" else DEFAULT_SHARE


def examples(full: int) -> int:
    return max(10, round(full * SHARE))
