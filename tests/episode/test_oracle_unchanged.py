"""The redesign of the orchestration layer (#24) changes no episode: the scripted oracle on the builtin suite
gives today the eval records and the training samples, id for id, that the code before it gave.

tests/fixtures/oracle_episodes.json was written by tests/episode/oracle_fixture.py at commit a18df76, before
the redesign began. Regenerate it only for a change that means to alter episodes, and say so in the commit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import available_factory
from tests.episode.oracle_fixture import collect

pytestmark = pytest.mark.ns

FIXTURE = Path(__file__).parents[1] / "fixtures" / "oracle_episodes.json"


@pytest.fixture
def tok() -> Any:
    return pytest.importorskip("swe_rl.rl.tokenizer", exc_type=ImportError).qwen_tokenizer()


async def test_the_oracles_records_and_samples_are_what_they_were_before_the_redesign(tasks, envs, tok):
    before = json.loads(FIXTURE.read_text())
    now = json.loads(json.dumps(await collect(tasks, envs, available_factory("ns"), tok)))
    assert len(before["training"]) == len(tasks) == 12 and all(
        s["samples"] for s in before["training"].values()
    )
    for instance_id, episode in before["training"].items():
        assert now["training"][instance_id] == episode, instance_id
    assert now["eval"] == before["eval"]
