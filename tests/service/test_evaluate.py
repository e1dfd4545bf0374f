"""``POST /container/evaluate`` is seed-exact, on a real exec server (ns backend) on loopback.

The seed's contract, read from Gen-Verse/OpenClaw-RL at 0d034dd5e65399fc1cc7c266feb9eddbb4c8c3a5,
``swe-rl/server/swe_exec_server.py`` (last changed in 63df3c37ccdab78db42fcb9e3b3f943b9d47f33e):
the patch is applied with ``git apply`` to a clean tree and ``eval_script`` is run by bash; ``resolved``
is "the script exited 0", ``returncode`` the script's exit code, ``output`` its output. A patch that is
empty, not a git diff, or refused by ``git apply`` is answered 200 ``{ok: true, resolved: false, error}``
without running the script. The seed reads an absent ``eval_script`` as ``""`` and runs that empty
script (exit 0), so it calls every patch that applies resolved; here ``""`` means "no script", like
absent: the official grading of the task the image maps to, and where it maps to none, 200 with
``resolved: false`` and an ``error`` saying there was nothing to grade by (docs/SERVICE.md lists it).
"""

from __future__ import annotations

import pytest

from tests.conftest import available_factory
from tests.service.servers import exec_server, post

pytestmark = pytest.mark.ns

TASK = "swe-rl-builtin__textkit-3"
# Applies to textkit-3's base commit but fixes nothing.
NO_FIX = """diff --git a/textkit/wrap.py b/textkit/wrap.py
--- a/textkit/wrap.py
+++ b/textkit/wrap.py
@@ -32,4 +32,5 @@ def truncate(text, limit, ellipsis="..."):
     \"\"\"``text`` cut to at most ``limit`` characters, ending in ``ellipsis`` when cut.\"\"\"
     if limit < 0:
         raise ValueError("limit must not be negative")
+    # looked at this
     if len(text) < limit:
"""
# The behaviour textkit-3's fix gives (its FAIL_TO_PASS test comes with the test patch, not in the tree).
EXACT_FIT = "python -c \"from textkit.wrap import truncate; assert truncate('abc', 3) == 'abc'\""
# Does not apply: its context is not in the file.
STALE = """diff --git a/textkit/wrap.py b/textkit/wrap.py
--- a/textkit/wrap.py
+++ b/textkit/wrap.py
@@ -1,2 +1,2 @@
-this line is not in the file
+nor is this one
 nor this
"""


@pytest.fixture(scope="module")
def node():
    available_factory("ns")
    server = exec_server(None, "--capacity", "6").start()
    yield server
    server.stop()


@pytest.fixture
def gold(task_by_id) -> str:
    return str(task_by_id[TASK].patch)


@pytest.fixture
async def create(node):
    """Creates sandboxes on the node; destroys them after the test."""
    made: list[str] = []

    async def make(image: str) -> str:
        status, created, _ = await post(node.url + "/container/create", {"image": image})
        assert status == 200, created
        made.append(created["container_id"])
        return str(created["container_id"])

    yield make
    for cid in made:
        await post(node.url + "/container/destroy", {"container_id": cid})


async def _evaluate(node, container_id: str, **fields) -> dict:
    status, reply, _ = await post(
        node.url + "/container/evaluate", {"container_id": container_id, **fields}, timeout=300
    )
    assert status == 200, reply
    return dict(reply)


async def test_the_scripts_exit_code_decides_on_an_image_that_maps_to_no_task(
    node, create, textkit_env, gold
):
    """An env key names an environment shared by several tasks: only the client's script can grade."""
    cid = await create(textkit_env.key)
    failed = await _evaluate(node, cid, patch=gold, eval_script="echo ran the tests; exit 1")
    assert failed["resolved"] is False and failed["returncode"] == 1, failed
    assert "ran the tests" in failed["output"]
    passed = await _evaluate(node, cid, patch=gold, eval_script="echo ran the tests; exit 0")
    assert passed["resolved"] is True and passed["returncode"] == 0, passed
    # the script sees the patch applied, and runs the real tests
    real = await _evaluate(
        node,
        cid,
        patch=gold,
        eval_script=f"grep -q 'if len(text) <= limit:' textkit/wrap.py && {EXACT_FIT}",
    )
    assert real["resolved"] is True and real["returncode"] == 0, real["output"][-2000:]
    unfixed = await _evaluate(
        node,
        cid,
        patch=NO_FIX,
        eval_script=EXACT_FIT,
    )
    assert unfixed["resolved"] is False and unfixed["returncode"] == 1, unfixed["output"][-2000:]
    assert "AssertionError" in unfixed["output"]


async def test_a_patch_that_does_not_apply_is_never_resolved(node, create, textkit_env, gold):
    cid = await create(textkit_env.key)
    for patch in (STALE, "", "   \n", "not a diff at all\n"):
        reply = await _evaluate(node, cid, patch=patch, eval_script="exit 0")
        assert reply["resolved"] is False and reply["returncode"] is None and reply["error"], (patch, reply)
    control = await _evaluate(node, cid, patch=gold, eval_script="exit 0")  # the same script passes
    assert control["resolved"] is True


async def test_official_grading_of_a_patch_that_does_not_apply_has_no_returncode(node, create):
    """As with a script: the tests did not run, so there is no exit code to report (docs/SERVICE.md)."""
    cid = await create(TASK)
    for patch in (STALE, ""):
        reply = await _evaluate(node, cid, patch=patch)
        assert reply["resolved"] is False and reply["returncode"] is None and reply["error"], (patch, reply)
    unfixed = await _evaluate(node, cid, patch=NO_FIX)  # the control: tests that ran and failed answer 1
    assert unfixed["returncode"] == 1 and unfixed["report"]["status"] == "unresolved"


async def test_the_script_runs_in_a_pristine_sandbox_not_the_agents(node, create, textkit_env, gold):
    cid = await create(textkit_env.key)
    status, ran, _ = await post(
        node.url + "/container/exec", {"container_id": cid, "command": "echo x > agent-was-here; ls"}
    )
    assert status == 200 and "agent-was-here" in ran["output"], "control: the agent's sandbox has the file"
    reply = await _evaluate(node, cid, patch=gold, eval_script="test ! -e agent-was-here")
    assert reply["resolved"] is True, reply
    reply = await _evaluate(node, cid, patch=gold, eval_script="test -e agent-was-here")
    assert reply["resolved"] is False and reply["returncode"] == 1, reply
    _, still, _ = await post(
        node.url + "/container/exec", {"container_id": cid, "command": "git status --short"}
    )
    assert still["output"] == "?? agent-was-here\n", "grading changed nothing in the agent's sandbox"


async def test_a_script_given_for_a_known_tasks_image_decides(node, create, gold):
    cid = await create(TASK)
    official_pass = await _evaluate(node, cid, patch=gold)
    assert official_pass["resolved"] is True and official_pass["report"]["status"] == "resolved"
    scripted_fail = await _evaluate(node, cid, patch=gold, eval_script="exit 1")
    assert scripted_fail["resolved"] is False and scripted_fail["returncode"] == 1, scripted_fail

    official_fail = await _evaluate(node, cid, patch=NO_FIX)
    assert official_fail["resolved"] is False and official_fail["report"]["status"] == "unresolved"
    scripted_pass = await _evaluate(node, cid, patch=NO_FIX, eval_script="exit 0")
    assert scripted_pass["resolved"] is True and scripted_pass["returncode"] == 0, scripted_pass


async def test_an_empty_eval_script_is_answered_200(node, create, textkit_env, gold):
    known = await create(TASK)
    graded = await _evaluate(node, known, patch=gold, eval_script="")  # no script: the official grading
    assert graded["resolved"] is True and graded["report"]["status"] == "resolved", graded
    graded = await _evaluate(node, known, patch=NO_FIX, eval_script="")
    assert graded["resolved"] is False and graded["report"]["status"] == "unresolved", graded

    unknown = await create(textkit_env.key)  # no task to grade by: never resolved, never a 400
    for fields in ({"eval_script": ""}, {}):
        reply = await _evaluate(node, unknown, patch=gold, **fields)
        assert reply["ok"] is True and reply["resolved"] is False and "nothing to grade" in reply["error"]


async def test_a_script_that_times_out_is_not_resolved(node, create, textkit_env, gold):
    cid = await create(textkit_env.key)
    reply = await _evaluate(node, cid, patch=gold, eval_script="sleep 30; exit 0", timeout=1)
    assert reply["resolved"] is False and "timed out" in reply["error"], reply


async def test_an_unknown_instance_id_is_404_not_another_tasks_grading(node, create, gold):
    cid = await create(TASK)
    status, reply, _ = await post(
        node.url + "/container/evaluate", {"container_id": cid, "patch": gold, "instance": "no-such-task"}
    )
    assert status == 404 and reply["error"]["kind"] == "not_found", reply
    control = await _evaluate(node, cid, patch=gold, instance=TASK)
    assert control["resolved"] is True


async def test_a_record_the_harness_cannot_run_is_a_structured_400(node, create, textkit_env, gold):
    """A ConfigError from grading (no eval_script, no test_cmd, unknown repo) is bad_request, not a bare 500."""
    cid = await create(textkit_env.key)
    record = {
        "instance_id": "nobody__nothing-1",
        "repo": "nobody/nothing",
        "base_commit": "HEAD",
        "problem_statement": "a bug",
        "FAIL_TO_PASS": ["tests/test_x.py::test_x"],
    }
    status, reply, _ = await post(
        node.url + "/container/evaluate", {"container_id": cid, "patch": gold, "instance": record}
    )
    assert status == 400 and reply["ok"] is False and reply["error"]["kind"] == "bad_request", reply
    assert "test_cmd" in reply["error"]["message"]
