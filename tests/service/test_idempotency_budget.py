"""The replay cache of the servers is bounded in bytes: a client that tags every call with X-Request-ID
(swe-rl's own does, file reads included) must not grow a server without limit."""

from __future__ import annotations

from starlette.responses import Response

from swe_rl.service.server_kit import Idempotency


async def test_replays_hold_at_most_the_byte_budget():
    idem = Idempotency(max_bytes=3_000_000)
    runs: list[str] = []

    def handler(name: str):
        async def run() -> Response:
            runs.append(name)
            return Response(b"x" * 1_000_000)

        return run

    for i in range(5):
        await idem.run(f"r{i}", handler(f"r{i}"))
    assert idem.bytes <= 3_000_000
    # the newest answers replay without running again; the oldest were dropped and run again
    replayed = await idem.run("r4", handler("r4 again"))
    assert replayed.headers.get("X-Idempotent-Replay") == "true" and runs[-1] == "r4"
    await idem.run("r0", handler("r0 again"))
    assert runs[-1] == "r0 again"


async def test_without_pressure_every_answer_replays():
    idem = Idempotency()  # control: the default budget keeps all five, so the eviction above is the budget's
    for i in range(5):
        await idem.run(f"r{i}", lambda: _answer())
    assert idem.bytes == 5_000_000
    assert (await idem.run("r0", lambda: _answer())).headers.get("X-Idempotent-Replay") == "true"


async def _answer() -> Response:
    return Response(b"x" * 1_000_000)
