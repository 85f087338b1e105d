"""bench.http_client.KeepAliveClient against a real aiohttp server on loopback: connections
kept alive and reused, the limit held, a closed connection reported and replaced."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web

from bench.http_client import KeepAliveClient


async def _serve(
    scenario: Callable[[KeepAliveClient, set[object]], Awaitable[None]],
    limit: int = 256,
    timeout_s: float = 60.0,
) -> None:
    peers: set[object] = set()
    never = asyncio.Event()

    async def hook(request: web.Request) -> web.Response:
        peers.add(request.transport.get_extra_info("peername") if request.transport else None)
        body = await request.read()
        if request.query.get("hang"):
            await never.wait()
        if request.query.get("drop") and request.transport is not None:
            request.transport.close()
        response = web.json_response({"echo": body.decode()}, status=202)
        if request.query.get("close"):
            response.force_close()
        return response

    app = web.Application()
    app.router.add_post("/hook", hook)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    client = KeepAliveClient("127.0.0.1", port, limit, timeout_s)
    try:
        await scenario(client, peers)
    finally:
        client.close()
        never.set()  # a hung handler would hold the server's shutdown for its 60 s grace
        await runner.cleanup()


def _post(client: KeepAliveClient, path: str, body: bytes) -> Awaitable[tuple[int, bytes]]:
    return client.send(client.request(path, body, "application/json"))


def test_sequential_posts_share_one_connection_and_get_their_own_answers() -> None:
    async def scenario(client: KeepAliveClient, peers: set[object]) -> None:
        for i in range(20):
            assert await _post(client, "/hook", b"%d" % i) == (202, b'{"echo": "%d"}' % i)
        assert len(peers) == 1

    asyncio.run(_serve(scenario))


def test_concurrent_posts_open_at_most_limit_connections() -> None:
    async def scenario(client: KeepAliveClient, peers: set[object]) -> None:
        answers = await asyncio.gather(*(_post(client, "/hook", b"%d" % i) for i in range(30)))
        assert [body for _, body in answers] == [b'{"echo": "%d"}' % i for i in range(30)]
        assert len(peers) <= 3

    asyncio.run(_serve(scenario, limit=3))


def test_connection_close_answer_is_read_and_the_next_post_opens_a_new_connection() -> None:
    async def scenario(client: KeepAliveClient, peers: set[object]) -> None:
        assert (await _post(client, "/hook?close=1", b"a"))[0] == 202
        assert (await _post(client, "/hook", b"b"))[0] == 202
        assert len(peers) == 2

    asyncio.run(_serve(scenario))


def test_a_connection_dropped_before_the_answer_raises_and_the_client_goes_on() -> None:
    async def scenario(client: KeepAliveClient, peers: set[object]) -> None:
        with pytest.raises(ConnectionError):
            await _post(client, "/hook?drop=1", b"a")
        assert await _post(client, "/hook", b"b") == (202, b'{"echo": "b"}')

    asyncio.run(_serve(scenario))


def test_a_server_that_never_answers_times_out_and_the_client_goes_on() -> None:
    async def scenario(client: KeepAliveClient, peers: set[object]) -> None:
        # wait_for bounds the test if the client's own timeout is broken (its error has
        # no message, so it would not match).
        with pytest.raises(TimeoutError, match="no answer in time"):
            await asyncio.wait_for(_post(client, "/hook?hang=1", b"a"), 10)
        assert await _post(client, "/hook", b"b") == (202, b'{"echo": "b"}')
        assert len(peers) == 2  # the silent connection was not reused

    asyncio.run(_serve(scenario, timeout_s=0.3))
