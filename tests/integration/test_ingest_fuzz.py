"""Fuzz: malformed bodies, headers, paths and credentials get a 4xx, and produce nothing.

The app runs in-process against the real broker (real producer, workflow table and outcome
tail). Three destinations exist — open, token and HMAC — so that each request shape can get
as far into the handler as it possibly can. Every generated request is one the contract
refuses; the test asserts that each is answered 4xx with the contract's error body (never a
5xx, never a 2xx) and that the end offsets of the ``deliveries`` topic did not move.
"""

from __future__ import annotations

import asyncio
import os
import string
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import quote

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from yarl import URL

from consumers.ingest.auth import sign, signature_of
from consumers.ingest.settings import IngestSettings, parse_duration_s
from tests.integration.test_ingest_helpers import (
    Client,
    breakout,
    candle_payload,
    current_minute_ms,
    end_offsets,
    fresh_settings,
    ingest_client,
    publish_workflows,
)

pytestmark = pytest.mark.integration

# The issue asks for at least 10,000; more can be asked for when hunting.
EXAMPLES = max(10_000, int(os.environ.get("SLUICEGATE_FUZZ_EXAMPLES", "10000")))
TOKEN = "fuzz-token-value"
SECRET = "fuzz-hmac-secret"
ENVIRON = {"FUZZ_TOKEN": TOKEN, "FUZZ_SECRET": SECRET}
LIMIT = 4096
REQUIRED = ("venue", "instrument", "interval", "candle_open", "rule")
VALID = candle_payload(current_minute_ms())


@dataclass
class Request:
    method: str
    path: str
    params: list[tuple[str, str]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    kind: str = ""


@dataclass
class Live:
    loop: asyncio.AbstractEventLoop
    client: Client
    statuses: Counter[int] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)


@pytest.fixture(scope="module")
def live() -> Iterator[tuple[Live, object]]:
    settings_, _ = fresh_settings()
    publish_workflows(
        settings_,
        breakout("open"),
        breakout("tok", token_env="FUZZ_TOKEN"),
        breakout("sig", hmac_env="FUZZ_SECRET"),
        breakout("unset", token_env="FUZZ_NEVER_SET"),
    )
    loop = asyncio.new_event_loop()
    context = ingest_client(
        settings_,
        environ=ENVIRON,
        limits=IngestSettings(max_body_bytes=LIMIT, ack_timeout_s=2.0),
    )
    client = loop.run_until_complete(context.__aenter__())

    async def ready() -> None:
        deadline = time.monotonic() + 30
        while True:
            async with client.get("/readyz") as response:
                if response.status == 200:
                    return
            assert time.monotonic() < deadline, "ingest not ready"
            await asyncio.sleep(0.1)

    loop.run_until_complete(ready())
    try:
        yield Live(loop, client), settings_
    finally:
        loop.run_until_complete(context.__aexit__(None, None, None))
        loop.close()


# --- strategies -------------------------------------------------------------------------

printable = st.text(alphabet=string.printable.strip() + " ", max_size=40)
any_text = st.text(max_size=40)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | any_text
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4),
    max_leaves=12,
)


def _refused_type(text: str) -> bool:
    # Anything that might name JSON or plain text is left to the fixed lists.
    lowered = text.lower()
    return "json" not in lowered and "text/plain" not in lowered


content_types = st.sampled_from(
    [
        "application/json",
        "text/plain",
        "application/json; charset=utf-8",
        "text/plain; charset=utf-8",
    ]
)
bad_content_types = st.sampled_from(
    [
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "text/html",
        "application/xml",
        "application/json; charset=latin-1",
        "text/plain; charset=utf-16",
        "application/octet-stream",
        "",
        ";;;",
        "application/",
        "/json",
    ]
) | printable.filter(_refused_type)


def valid_body() -> bytes:
    return orjson.dumps(VALID)


def incomplete_payloads() -> st.SearchStrategy[dict[str, object]]:
    """The valid payload with at least one identity field removed or emptied, plus noise."""
    return st.builds(
        _incomplete,
        st.sets(st.sampled_from(REQUIRED), min_size=1),
        st.sampled_from([None, "", "   ", [], {}, [1], {"a": 1}, "__drop__"]),
        st.dictionaries(any_text.filter(lambda k: k not in REQUIRED), json_values, max_size=3),
    )


def _incomplete(
    broken: set[str], replacement: object, noise: dict[str, object]
) -> dict[str, object]:
    payload = {**VALID, **noise}
    for name in broken:
        if replacement == "__drop__":
            payload.pop(name, None)
        else:
            payload[name] = replacement
    return payload


random_objects = st.dictionaries(any_text, json_values, max_size=6).filter(
    lambda d: not set(REQUIRED) <= set(d)
)

bodies = st.one_of(
    st.binary(max_size=300),
    json_values.filter(lambda v: not isinstance(v, dict)).map(orjson.dumps),
    random_objects.map(orjson.dumps),
    incomplete_payloads().map(orjson.dumps),
    st.lists(st.tuples(printable, printable), max_size=6).map(
        lambda pairs: "\n".join(f"{k}={v}" for k, v in pairs).encode()
    ),
    any_text.map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.integers(1, 60).map(lambda n: valid_body()[:-n]),
    # Numbers orjson cannot hold, written by hand.
    st.integers().map(lambda n: f'{{"candle_open": {n}, "n": {n}e{n}}}'.encode()),
)

paths = (
    st.lists(any_text, min_size=0, max_size=4)
    .map(lambda segments: "/" + "/".join(quote(s, safe="") for s in segments))
    .filter(lambda p: p not in ("/healthz", "/readyz"))
)

header_names = st.text(alphabet=string.ascii_letters + "-", min_size=1, max_size=20).filter(
    lambda n: (
        n.lower()
        not in {
            "content-length",
            "transfer-encoding",
            "host",
            "connection",
            "content-type",
            "expect",
            "upgrade",
            "content-encoding",
        }
    )
)
random_headers = st.dictionaries(header_names, printable, max_size=4)


@st.composite
def requests(draw: st.DrawFn) -> Request:
    shape = draw(
        st.sampled_from(
            [
                "path",
                "method",
                "open-body",
                "open-content-type",
                "open-encoding",
                "too-large",
                "env",
                "wait",
                "token",
                "signature",
                "unset",
                "unknown-subscription",
            ]
        )
    )
    headers = draw(random_headers)
    if shape == "path":
        return Request(
            draw(st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"])),
            draw(paths),
            headers={**headers, "Content-Type": draw(content_types)},
            body=draw(bodies),
            kind=shape,
        )
    if shape == "method":
        return Request(
            draw(st.sampled_from(["GET", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"])),
            "/v1/hooks/" + draw(st.sampled_from(["open", "tok", "sig"])),
            headers=headers,
            body=valid_body(),
            kind=shape,
        )
    if shape == "unknown-subscription":
        name = draw(any_text.filter(lambda s: s not in ("open", "tok", "sig", "unset") and s))
        return Request(
            "POST",
            "/v1/hooks/" + quote(name, safe=""),
            headers={**headers, "Content-Type": "application/json"},
            body=valid_body(),
            kind=shape,
        )
    base = Request("POST", "/v1/hooks/open", headers={**headers}, kind=shape)
    base.headers["Content-Type"] = draw(content_types)
    if shape == "open-body":
        base.body = draw(bodies)
    elif shape == "open-content-type":
        base.headers["Content-Type"] = draw(bad_content_types)
        base.body = valid_body()
    elif shape == "open-encoding":
        base.headers["Content-Encoding"] = draw(st.sampled_from(["gzip", "deflate"]))
        base.body = draw(st.binary(max_size=100))
    elif shape == "too-large":
        size = draw(st.integers(LIMIT + 1, LIMIT * 3))
        base.body = valid_body() + b" " * (size - len(valid_body()))
    elif shape == "env":
        base.body = valid_body()
        env = draw(any_text.filter(lambda e: e not in ("paper", "live")))
        base.params = [("env", env)]
        if draw(st.booleans()):
            base.params = [("env", "paper"), ("env", draw(st.sampled_from(["paper", "live"])))]
    elif shape == "wait":
        base.body = valid_body()
        wait = draw(any_text.filter(_not_a_valid_wait))
        base.params = [("wait", wait)]
    elif shape == "token":
        base.path = "/v1/hooks/tok"
        base.body = valid_body()
        wrong = draw(any_text.filter(lambda t: t != TOKEN))
        where = draw(st.sampled_from(["none", "query", "body", "both", "twice", "nonstring"]))
        if where == "query":
            base.params = [("token", wrong)]
        elif where == "body":
            base.body = orjson.dumps({**VALID, "token": wrong})
        elif where == "both":
            base.params = [("token", TOKEN)]
            base.body = orjson.dumps({**VALID, "token": wrong})
        elif where == "twice":
            base.params = [("token", TOKEN), ("token", wrong)]
        elif where == "nonstring":
            base.body = orjson.dumps({**VALID, "token": draw(json_values.filter(_not_str))})
        # A right token with a broken body must still be refused (422), never produced.
        if draw(st.booleans()):
            base.params = [("token", TOKEN)]
            base.body = draw(bodies)
    elif shape == "signature":
        base.path = "/v1/hooks/sig"
        body = valid_body()
        now = int(time.time())
        variant = draw(st.sampled_from(["random", "hex", "expired", "tampered", "wrong-key"]))
        if variant == "random":
            header = draw(printable)
        elif variant == "hex":
            digest = draw(st.text(alphabet="0123456789abcdef", min_size=64, max_size=64))
            header = f"t={now},v1={digest}"
        elif variant == "expired":
            age = draw(st.integers(301, 10**9) | st.integers(-(10**9), -301))
            header = sign(SECRET.encode(), now - age, body)
        elif variant == "tampered":
            header = f"t={now},v1={signature_of(SECRET.encode(), str(now), body)}"
            body = body.replace(b"buy", draw(st.sampled_from([b"sell", b"BUY", b"buy "])))
        else:
            header = sign(draw(printable).encode() or b"x", now, body)
        if draw(st.booleans()) or variant != "random":
            base.headers["X-Sluicegate-Signature"] = header
        base.body = body
    elif shape == "unset":
        base.path = "/v1/hooks/unset"
        base.body = valid_body()
        base.params = [("token", draw(any_text))]
    return base


def _not_a_valid_wait(text: str) -> bool:
    seconds = parse_duration_s(text)
    return seconds is None or seconds > 10


def _not_str(value: object) -> bool:
    return value is not None and not isinstance(value, str)


async def send(client: Client, request: Request) -> tuple[int, bytes, str]:
    # Built by hand: the test client refuses paths such as "//x" (scheme-relative URLs).
    root = str(client.make_url("/")).rstrip("/")
    async with client.session.request(
        request.method,
        URL(root + request.path, encoded=True),
        params=request.params,
        headers=request.headers,
        data=request.body if request.method not in ("GET", "HEAD") else None,
    ) as response:
        return response.status, await response.read(), response.content_type


def test_malformed_requests_get_4xx_and_produce_nothing(live: tuple[Live, object]) -> None:
    state, settings_ = live
    before = end_offsets(settings_, "deliveries")  # type: ignore[arg-type]

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(requests())
    def one(request: Request) -> None:
        status, body, content_type = state.loop.run_until_complete(send(state.client, request))
        state.statuses[status] += 1
        state.kinds[request.kind] += 1
        assert 400 <= status < 500, (status, body[:500], request)
        if request.method != "HEAD":
            assert content_type == "application/json", (status, body[:200], request)
            error = orjson.loads(body)["error"]
            assert set(error) == {"code", "message", "problems"}
            assert TOKEN not in error["message"] and SECRET not in error["message"]

    one()
    assert sum(state.statuses.values()) >= EXAMPLES
    assert end_offsets(settings_, "deliveries") == before  # type: ignore[arg-type]
    print(f"\nfuzz: {sum(state.statuses.values())} requests; statuses {dict(state.statuses)}")
    print(f"fuzz: shapes {dict(state.kinds)}")
    # Every refusal class was reached.
    assert {401, 404, 405, 413, 415, 422} <= set(state.statuses), state.statuses
