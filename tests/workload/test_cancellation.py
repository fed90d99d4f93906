"""A cancellation the client library makes (aiormq cancels what waits on a connection
whose reader stopped) is a lost connection to the workload, with an unknown outcome;
a cancellation of the client's own task still cancels it."""

from __future__ import annotations

import asyncio

import pytest

from harness.workload.answers import CLIENT_ERRORS, CancelledByLibrary, answer_of


def test_a_future_the_library_cancels_is_a_client_error() -> None:
    async def scenario() -> BaseException:
        confirmation = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(0.01, confirmation.cancel)
        try:
            await answer_of(confirmation)
        except CLIENT_ERRORS as exc:
            return exc
        raise AssertionError("the cancelled confirmation raised nothing")

    caught = asyncio.run(scenario())
    assert isinstance(caught, CancelledByLibrary)
    assert "connection closed" in str(caught)


def test_cancelling_the_awaiting_task_still_cancels_it() -> None:
    async def scenario() -> None:
        never = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(answer_of(never))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert task.cancelled()

    asyncio.run(scenario())


def test_an_answer_passes_through() -> None:
    async def scenario() -> str:
        answer = asyncio.get_running_loop().create_future()
        answer.set_result("confirm-ok")
        return await answer_of(answer)

    assert asyncio.run(scenario()) == "confirm-ok"
