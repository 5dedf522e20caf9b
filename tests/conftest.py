"""Shared fixtures: paths of the bundled profiles and a session-wide rule book."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
REAL = FIXTURES / "ascend-level1-2ranks"
SAMPLE_SINGLE = FIXTURES / "samples" / "single_rank" / "localhost_2231054_20251127192733123_ascend_pt"
SAMPLE_CLUSTER = FIXTURES / "samples" / "cluster_2ranks"

sys.path.insert(0, str(Path(__file__).parent))
# the parsed-YAML cache of the rule book goes to a directory of this run, not the user's ~/.cache
os.environ.setdefault("ADVISOR_CACHE_DIR", tempfile.mkdtemp(prefix="advisor-test-cache-"))


@pytest.fixture(scope="session")
def rulebook():
    from advisor.diagnose import default_rulebook

    return default_rulebook()
