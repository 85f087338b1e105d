"""Fuzz: malformed bodies, headers, paths and credentials get a 4xx, and produce nothing.

The app runs in-process against the real broker (real producer, workflow table and outcome
tail). Destinations exist — open, token, HMAC and one that takes CloudEvents — so that each
request shape can get as far into the handler as it possibly can. Every generated request is
one the contract refuses; the test asserts that each is answered 4xx with the contract's
error body (never a 5xx, never a 2xx; a CloudEvents batch is 207 with every event refused)
and that the end offsets of the ``deliveries`` topic did not move.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import socket
import string
import struct
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
from consumers.ingest.settings import IngestSettings
from streams.core.workflow import WorkflowDefinition, revise
from streams.logs import JsonLineFormatter
from streams.text import parse_duration_s
from tests.support.ingest import (
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
CE_REQUIRED = ("id", "source", "specversion", "type")
VALID_CE: dict[str, object] = {
    "specversion": "1.0",
    "id": "fuzz-1",
    "source": "/fuzz",
    "type": "com.example.fuzz",
    "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 5)),
    "data": {"side": "buy", "price": "1"},
}
CE_HEADERS = {f"ce-{k}": str(v) for k, v in VALID_CE.items() if k != "data"}
BAD_TIMES = ["yesterday", "2026-11-30T12:00:00", "2026-13-01T00:00:00Z", "", "2026-11-30 12:00Z"]


def cloudevents_workflow(subscription: str) -> object:
    """An open destination that takes CloudEvents (identity: source + id)."""
    definition = WorkflowDefinition(
        subscription=subscription,
        environment="paper",
        slots=("analysis",),
        branch_timeout_ms=30_000,
        branch_attempts=3,
        retention_ms=86_400_000,
        identity_event_id_field=None,
        identity_derived_fields=(),
        immutable_fields=("data.side",),
        validity_source_time="time",
        validity_window_ms=60_000,
        scope_fields=(),
        scope_sequence_field=None,
        auth_token_env=None,
        auth_hmac_secret_env=None,
        identity_envelope="cloudevents",
    )
    return revise(None, definition, int(time.time() * 1000))


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
        cloudevents_workflow("ce"),  # type: ignore[arg-type]
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


def _broken_event(kind: str, name: str, value: object, version: str) -> dict[str, object]:
    """The valid event with one thing the spec forbids: every such event is refused."""
    event = dict(VALID_CE)
    if kind == "drop":
        event.pop(name)
    elif kind == "set":
        event[name] = value  # null, empty or not a string: never a valid required attribute
    elif kind == "specversion":
        event["specversion"] = version
    elif kind == "time":
        event["time"] = BAD_TIMES[len(version) % len(BAD_TIMES)]
    elif kind == "name":
        event[f"{name}_X"] = "x"
    else:
        event["data_base64"] = "aGk="  # with data: mutually exclusive
    return event


broken_events = st.builds(
    _broken_event,
    st.sampled_from(["drop", "set", "specversion", "time", "name", "both-data"]),
    st.sampled_from(CE_REQUIRED),
    st.sampled_from(["", None, 1, True, [], {}]),
    st.sampled_from(["0.3", "1", "2.0", "1.0.2", " 1.0", "v1.0"]),
)
# Anything not a valid event: broken events, random objects, and JSON that is no object.
ce_items = broken_events | random_objects | json_values.filter(lambda v: not isinstance(v, dict))


def _broken_headers(kind: str, name: str, encoded: str, when: str) -> dict[str, str]:
    headers = dict(CE_HEADERS)
    if kind == "drop":
        headers.pop(f"ce-{name}")
    elif kind == "empty":
        headers[f"ce-{name}"] = ""
    elif kind == "encoding":
        headers[f"ce-{name}"] = encoded  # does not percent-decode to UTF-8
    elif kind == "datacontenttype":
        headers["ce-datacontenttype"] = "application/json"
    else:
        headers["ce-time"] = when
    return headers


broken_headers = st.builds(
    _broken_headers,
    st.sampled_from(["drop", "empty", "encoding", "datacontenttype", "time"]),
    st.sampled_from(CE_REQUIRED),
    st.sampled_from(["%C0%A0", "%FF", "%ED%A0%80", "a%E2%82"]),
    st.sampled_from(BAD_TIMES),
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
                "ce-structured",
                "ce-batch",
                "ce-binary",
                "ce-envelope",
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
    if shape.startswith("ce-"):
        return _cloudevents_request(draw, shape, headers)
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
        variant = draw(
            st.sampled_from(
                ["random", "hex", "expired", "tampered", "wrong-key", "elsewhere", "retired"]
            )
        )
        if variant == "random":
            header = draw(printable)
        elif variant == "hex":
            digest = draw(st.text(alphabet="0123456789abcdef", min_size=64, max_size=64))
            header = f"t={now},{draw(st.sampled_from(['v1', 'v2']))}={digest}"
        elif variant == "expired":
            age = draw(st.integers(301, 10**9) | st.integers(-(10**9), -301))
            header = sign(SECRET.encode(), now - age, "sig", "paper", body)
        elif variant == "tampered":
            header = f"t={now},v2={signature_of(SECRET.encode(), str(now), 'sig', 'paper', body)}"
            body = body.replace(b"buy", draw(st.sampled_from([b"sell", b"BUY", b"buy "])))
        elif variant == "elsewhere":
            # Correct secret, body and time, but signed for another destination.
            sub, env = draw(st.sampled_from([("sig", "live"), ("tok", "paper"), ("sig.", "paper")]))
            header = sign(SECRET.encode(), now, sub, env, body)
        elif variant == "retired":
            # The v1 scheme's string ("<t>." + body) under the right secret.
            digest = hmac.new(SECRET.encode(), f"{now}.".encode() + body, "sha256").hexdigest()
            header = f"t={now},v1={digest}"
        else:
            header = sign(draw(printable).encode() or b"x", now, "sig", "paper", body)
        if draw(st.booleans()) or variant != "random":
            base.headers["X-Sluicegate-Signature"] = header
        base.body = body
    elif shape == "unset":
        base.path = "/v1/hooks/unset"
        base.body = valid_body()
        base.params = [("token", draw(any_text))]
    return base


def _cloudevents_request(draw: st.DrawFn, shape: str, headers: dict[str, str]) -> Request:
    """A CloudEvents request the contract refuses (every event in a batch refused too)."""
    headers = {k: v for k, v in headers.items() if not k.lower().startswith("ce-")}
    base = Request("POST", "/v1/hooks/ce", headers=headers, kind=shape)
    if shape == "ce-structured":
        base.headers["Content-Type"] = "application/cloudevents+json"
        base.body = draw(ce_items.map(orjson.dumps) | bodies)
    elif shape == "ce-batch":
        base.headers["Content-Type"] = "application/cloudevents-batch+json"
        base.body = draw(
            st.lists(ce_items, max_size=6).map(orjson.dumps)
            | st.integers(101, 400).map(lambda n: b"[" + b",".join([b"{}"] * n) + b"]")
            | bodies
        )
    elif shape == "ce-binary":
        base.headers.update(draw(broken_headers))
        base.headers["Content-Type"] = draw(content_types)
        base.body = draw(st.just(orjson.dumps(VALID_CE["data"])) | bodies)
    # The wrong envelope: an event to a plain destination, a plain body to a CloudEvents one.
    elif draw(st.booleans()):
        base.path = "/v1/hooks/open"
        base.headers["Content-Type"] = "application/cloudevents+json"
        base.body = orjson.dumps(VALID_CE)
    else:
        base.headers["Content-Type"] = "application/json"
        base.body = valid_body()
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
        if status == 207 and request.kind == "ce-batch":
            # A batch is answered per event: every one of them refused.
            results = orjson.loads(body)["results"]
            assert all(400 <= r["status"] < 500 for r in results), (results[:3], request)
            return
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


# --- raw requests: bytes no HTTP client library would send ------------------------------

RAW_EXAMPLES = max(3_000, int(os.environ.get("SLUICEGATE_RAW_FUZZ_EXAMPLES", "3000")))
# Characters that are digits to Python (``str.isdigit``, ``\d``, ``int()``) but not ASCII.
UNICODE_DIGITS = "٠١٢٣٤٥٦٧٨٩۰۱۲۳۴۵۶۷۸۹०१२३४५६७८९০১২৩৪৫৬৭৮৯０１２３４５６７８９¹²³⁴"


@dataclass
class Raw:
    """One connection's worth of bytes; ``abort`` says how the client ends it."""

    data: bytes
    abort: str = ""  # "", "close", "half-close" or "reset"
    kind: str = ""


def _head(target: bytes, headers: list[tuple[bytes, bytes]], body: bytes) -> bytes:
    lines = [b"POST " + target + b" HTTP/1.1", b"Host: fuzz"]
    lines += [name + b": " + value for name, value in headers]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def _cl(body: bytes) -> tuple[bytes, bytes]:
    return (b"Content-Length", str(len(body)).encode())


JSON_TYPE = (b"Content-Type", b"application/json")
# Bytes allowed in a header value by nobody's grammar: everything except CR and LF.
header_bytes = st.binary(min_size=1, max_size=40).filter(
    lambda b: b"\r" not in b and b"\n" not in b
)
odd_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\r\n"), min_size=1, max_size=30
)
odd_values = st.one_of(
    header_bytes,
    odd_text.map(lambda t: t.encode("utf-8")),
    odd_text.map(
        lambda t: t.encode("utf-16-le", "surrogatepass").replace(b"\r", b"").replace(b"\n", b"")
    ),
    st.text(alphabet=string.printable.strip() + "éü€ÿ", min_size=1, max_size=30).map(
        lambda t: t.encode("latin-1", "replace")
    ),
)


def _not_acceptable_type(value: bytes) -> bool:
    lowered = value.lower()
    return b"json" not in lowered and b"text/plain" not in lowered


@st.composite
def raw_requests(draw: st.DrawFn) -> Raw:
    shape = draw(
        st.sampled_from(
            [
                "signature-unicode-digits",
                "signature-bytes",
                "token-bytes",
                "header-bytes",
                "content-type-bytes",
                "target-bytes",
                "content-length",
                "aborted",
                "ce-header-bytes",
            ]
        )
    )
    body = valid_body()
    if shape == "signature-unicode-digits":
        digits = draw(st.text(alphabet=UNICODE_DIGITS + "0123456789", min_size=1, max_size=12))
        if digits.isascii():
            digits = draw(st.sampled_from(UNICODE_DIGITS)) + digits[1:]
        hex_digest = signature_of(SECRET.encode(), str(int(time.time())), "sig", "paper", body)
        version = draw(st.sampled_from(["v1", "v2"]))
        value = f"t={digits},{version}={hex_digest}".encode()
        headers = [JSON_TYPE, (b"X-Sluicegate-Signature", value), _cl(body)]
        return Raw(_head(b"/v1/hooks/sig", headers, body), kind=shape)
    if shape == "signature-bytes":
        value = draw(odd_values)
        headers = [JSON_TYPE, (b"X-Sluicegate-Signature", value), _cl(body)]
        return Raw(_head(b"/v1/hooks/sig", headers, body), kind=shape)
    if shape == "token-bytes":
        raw_token = draw(odd_values.filter(lambda v: v != TOKEN.encode()))
        where = draw(st.sampled_from(["quoted", "raw", "body"]))
        target = b"/v1/hooks/tok"
        if where == "quoted":
            target += b"?token=" + quote(raw_token, safe="").encode()
        elif where == "raw":
            target += b"?token=" + raw_token.replace(b" ", b"").replace(b"#", b"") or b"x"
        else:
            body = (
                body[:-1] + b',"token":"' + raw_token.replace(b'"', b"").replace(b"\\", b"") + b'"}'
            )
        headers = [JSON_TYPE, _cl(body)]
        return Raw(_head(target, headers, body), kind=shape)
    if shape == "header-bytes":
        name = draw(
            st.sampled_from([b"X-Odd", b"User-Agent", b"Accept", b"X-Sluicegate-Signature"])
            | st.binary(min_size=1, max_size=12).filter(
                lambda b: b":" not in b and b"\r" not in b and b"\n" not in b
            )
        )
        headers = [JSON_TYPE, (name, draw(odd_values)), _cl(body)]
        # No credentials for tok: whatever the header does, the answer is a refusal.
        return Raw(_head(b"/v1/hooks/tok", headers, body), kind=shape)
    if shape == "content-type-bytes":
        value = draw(odd_values.filter(_not_acceptable_type))
        headers = [(b"Content-Type", value), _cl(body)]
        return Raw(_head(b"/v1/hooks/open", headers, body), kind=shape)
    if shape == "target-bytes":
        tail = draw(
            st.binary(min_size=1, max_size=30).filter(
                lambda b: b" " not in b and b"\r" not in b and b"\n" not in b
            )
        )
        if tail in (b"open", b"open?env=paper"):
            tail = b"\xff" + tail
        prefix = draw(st.sampled_from([b"/v1/hooks/", b"/", b"/v1/", b""]))
        headers = [JSON_TYPE, _cl(body)]
        return Raw(_head(prefix + tail, headers, body), kind=shape)
    if shape == "ce-header-bytes":
        # Binary mode with header values no CloudEvent can have; ce-type is left out, so the
        # event is refused whatever the odd value turns out to be.
        name = draw(st.sampled_from([b"ce-id", b"ce-source", b"ce-subject", b"ce-comexample"]))
        ce = [(b"ce-specversion", b"1.0"), (b"ce-id", b"x"), (b"ce-source", b"/fuzz")]
        headers = [JSON_TYPE, *ce, (name, draw(odd_values)), _cl(body)]
        return Raw(_head(b"/v1/hooks/ce", headers, body), kind=shape)
    if shape == "content-length":
        value = draw(
            st.sampled_from(
                [
                    b"+5",
                    b"-1",
                    b"0x10",
                    b"1e3",
                    "\uff15".encode(),
                    b"5, 6",
                    b" ",
                    b"99999999999999999999",
                ]
            )
            | st.text(alphabet=UNICODE_DIGITS, min_size=1, max_size=4).map(lambda t: t.encode())
        )
        headers = [JSON_TYPE, (b"Content-Length", value)]
        if draw(st.booleans()):
            headers.append((b"Transfer-Encoding", b"chunked"))
        return Raw(_head(b"/v1/hooks/open", headers, body), kind=shape)
    # An upload that never completes: part of the body, then the client goes away.
    chunked = draw(st.booleans())
    keep = draw(st.integers(0, len(body) - 1))
    if chunked:
        data = _head(b"/v1/hooks/open", [JSON_TYPE, (b"Transfer-Encoding", b"chunked")], b"")
        data += f"{len(body):x}\r\n".encode() + body[:keep]
    else:
        data = _head(b"/v1/hooks/open", [JSON_TYPE, _cl(body)], body[:keep])
    return Raw(data, abort=draw(st.sampled_from(["close", "half-close", "reset"])), kind=shape)


async def send_raw(client: Client, request: Raw) -> int | None:
    """The answer's status, or ``None`` when the server (rightly) answered nothing."""
    reader, writer = await asyncio.open_connection(client.host, client.port)
    try:
        writer.write(request.data)
        await writer.drain()
        if request.abort == "close":
            return None
        if request.abort == "reset":
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return None
        if request.abort == "half-close":
            writer.write_eof()
        answer = await asyncio.wait_for(reader.read(65536), 15)
    except (ConnectionResetError, BrokenPipeError):
        return None
    finally:
        writer.close()
    if not answer:
        assert request.abort, f"no answer to a complete request: {request}"
        return None
    status_line = answer.split(b"\r\n", 1)[0]
    return int(status_line.split()[1])


class CapturedLogs(logging.Handler):
    """Every record, formatted as ``sluicegate ingest`` formats it; format failures kept."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(JsonLineFormatter("ingest"))
        self.records: list[logging.LogRecord] = []
        self.lines: list[str] = []
        self.failures: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        try:
            self.lines.append(self.format(record))
        except Exception as e:  # what logging.Handler.handleError would print a traceback for
            self.failures.append(f"{type(e).__name__}: {e}")


def test_raw_odd_encodings_and_aborted_uploads_get_4xx_or_nothing(
    live: tuple[Live, object],
) -> None:
    state, settings_ = live
    before = end_offsets(settings_, "deliveries")  # type: ignore[arg-type]
    statuses: Counter[int | None] = Counter()
    kinds: Counter[str] = Counter()
    captured = CapturedLogs()
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(captured)
    root.setLevel(logging.INFO)

    @settings(
        max_examples=RAW_EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(raw_requests())
    def one(request: Raw) -> None:
        status = state.loop.run_until_complete(send_raw(state.client, request))
        statuses[status] += 1
        kinds[request.kind] += 1
        if status is not None:
            assert 400 <= status < 500, (status, request)

    try:
        one()
        # Aborted uploads are noticed by the server after the client has gone.
        state.loop.run_until_complete(asyncio.sleep(1.0))
    finally:
        root.removeHandler(captured)
        root.setLevel(old_level)
    print(f"\nraw fuzz: {sum(statuses.values())} connections; statuses {dict(statuses)}")
    print(f"raw fuzz: shapes {dict(kinds)}")
    assert end_offsets(settings_, "deliveries") == before  # type: ignore[arg-type]
    assert captured.failures == []
    faults = [
        f"{r.name}: {r.getMessage()[:200]}"
        for r in captured.records
        if r.levelno >= logging.ERROR or r.exc_info is not None
    ]
    assert faults == [], f"{len(faults)} error records, first: {faults[:3]}"
    assert not any("Traceback" in line for line in captured.lines)
    assert not any(
        '"status":500' in line or '"status":5' in line
        for line in captured.lines
        if "sluicegate.ingest.access" in line
    )


def test_a_content_type_the_header_parser_chokes_on_is_a_415(live: tuple[Live, object]) -> None:
    # Found by the test above: aiohttp hands this value to the standard library's email
    # parser, which raised IndexError, and the sender got a 500.
    state, _ = live
    for value in (";0*", ";", ";*", "; 0*=", "text/plain;0*"):
        request = Request(
            "POST", "/v1/hooks/open", headers={"Content-Type": value}, body=valid_body()
        )
        status, body, content_type = state.loop.run_until_complete(send(state.client, request))
        assert status == 415, (value, status, body[:300])
        assert content_type == "application/json"
        assert orjson.loads(body)["error"]["code"] == "unsupported_media_type"
