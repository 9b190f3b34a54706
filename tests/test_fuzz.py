"""Bounded fuzzing in CI: byte-level mutations (tests/corpus.py `mutations`) of the real
fixture files, fed to each loader as wsperf reads them. The only acceptable outcomes
are a WsperfError with a one-line message or a result; anything else is a finding.
Deterministic (derandomized, no example database) so CI sees the same cases every run;
`benchmarks/fuzz_loaders.py` runs the same targets for as long as it is given, with
fresh randomness. The report loader gets few cases: each starts work in its reader
processes."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import corpus
from support import time_limit
from wsperf.collectors.store import open_store

CASES = {"sanitizer_xml": 400, "cudagdb": 400, "ptx": 200, "config": 300, "manifest": 300, "ncu_report": 25,
         "timeline": 200, "environment": 200, "nsys": 40}
LIMIT_S = 300  # per target (SIGALRM)

@pytest.fixture(autouse=True)
def limit():
    with time_limit(LIMIT_S, f"fuzzing one loader ran past {LIMIT_S} s: an input hangs it"):
        yield

@pytest.mark.parametrize("target", sorted(CASES))
def test_mutated_fixtures_give_an_error_or_a_result(target, tmp_path):
    store = open_store(None)
    targets = corpus.Targets(tmp_path, store)
    seeds = corpus.seeds(target, tmp_path)
    load = getattr(targets, target)
    outcomes: dict[str, int] = {}

    @settings(max_examples=CASES[target], deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(seed=st.integers(0, len(seeds) - 1), mutate=corpus.mutations_for(target))
    def run(seed, mutate):
        outcome = load(mutate(seeds[seed]))
        outcomes[outcome] = outcomes.get(outcome, 0) + 1

    run()
    store.close()
    print(f"\nfuzz {target}: {sum(outcomes.values())} cases, {outcomes}")
    assert sum(outcomes.values()) >= CASES[target]
