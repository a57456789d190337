"""The scripted differential cases (cases.py) against Kafka 4.3.1 and Odradek: every difference in a normalised
answer fails its case unless allowlist.py names it. The summary (how many (api, version, case) triples agree, how
many differ only where allowed) is printed at the end of the run and kept in build/differential-summary.txt."""

from __future__ import annotations

import pytest

from odradek.protocol import API_BY_KEY

from . import cases
from .allowlist import ALLOWED, allowed
from .harness import Step

ALL_CASES = cases.all_cases()


def test_kafka_versions_are_the_reference(pair):
    """cases.KAFKA_VERSIONS, on which the sweeps are built, is what the reference broker advertises."""
    [outcome] = pair.run(cases.Case("api-versions-reference", [Step("ApiVersions", 3, {
        "client_software_name": "differential", "client_software_version": "1.0"})]))
    advertised = {entry["api_key"]: (entry["min_version"], entry["max_version"])
                  for entry in outcome.kafka["api_keys"]}
    assert advertised == cases.KAFKA_VERSIONS


def test_every_api_is_sent_at_its_newest_and_an_old_version():
    sent: dict[str, set] = {}
    for case in ALL_CASES:
        for step in case.steps:
            sent.setdefault(step.api, set()).add(step.version)
    for key, mine in sorted(API_BY_KEY.items()):
        both = cases.versions(mine.name)
        if not both:
            continue
        assert mine.name in sent, f"no case sends {mine.name}"
        assert both[-1] in sent[mine.name], f"{mine.name} v{both[-1]} (the newest both serve) is never sent"
        if len(both) > 1:
            assert any(v < both[-1] for v in sent[mine.name]), f"{mine.name}: no case at an older version"


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda case: case.id)
def test_case(pair, seeded, summary, case):
    failures = []
    for outcome in pair.run(case):
        verdicts = [(difference, allowed(outcome.api, outcome.version, outcome.case, difference[0]))
                    for difference in outcome.differences]
        summary.record(outcome, all(entry is not None for _, entry in verdicts))
        summary.used.update(entry for _, entry in verdicts if entry is not None)
        failures += [f"step {outcome.index} {outcome.api} v{outcome.version}: {path}: Kafka {kafka!r:.300}, "
                     f"Odradek {odradek!r:.300}" for (path, kafka, odradek), entry in verdicts if entry is None]
    assert not failures, "\n".join(failures)


def test_summary_counts_every_api(summary):
    """Run last in the module: the triples compared cover every API key of Odradek's that Kafka serves too, and
    every allowlist entry still allows a difference."""
    compared = {triple[0] for triple in summary.triples}
    if len(summary.triples) < len(ALL_CASES):  # a selection of the cases (-k): nothing to say of the whole
        pytest.skip("only some cases ran")
    assert {a.name for a in API_BY_KEY.values() if cases.versions(a.name)} <= compared
    unused = [entry for entry in ALLOWED if entry not in summary.used]
    assert not unused, f"allowlist entries no difference needs any more: {unused}"
