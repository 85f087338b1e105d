"""Webhook authentication: signatures, replay window and guard, tokens, policies."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import replace

import pytest

from consumers.ingest.auth import (
    AuthPolicy,
    Credentials,
    ReplayGuard,
    VerifiedSignature,
    authenticate,
    parse_signature,
    policy_for,
    sign,
    verify_signature,
    verify_token,
)
from consumers.ingest.errors import Unauthorized
from schemas.events import WorkflowRevised

SECRET = b"s3cret-signing-key"
BODY = b'{"instrument":"BTCUSDT","candle_open":"2026-11-30T12:00:00Z"}'
NOW = 1_796_040_000
SUB, ENV = "btc-breakout", "paper"


def sig(secret: bytes = SECRET, now: int = NOW, body: bytes = BODY) -> str:
    """The header a sender attaches for btc-breakout/paper."""
    return sign(secret, now, SUB, ENV, body)


def verify(
    header: str, body: bytes = BODY, now: float = NOW, sub: str = SUB, env: str = ENV
) -> VerifiedSignature:
    return verify_signature(
        SECRET, header, body, subscription=sub, environment=env, now_s=now, window_s=300
    )


def workflow(**changes: object) -> WorkflowRevised:
    base = WorkflowRevised(
        subscription="btc-breakout",
        environment="paper",
        revision=1,
        slots=("analysis",),
        branch_timeout_ms=30_000,
        retention_ms=7 * 86_400_000,
        identity_event_id_field=None,
        identity_derived_fields=("instrument", "candle_open"),
        immutable_fields=(),
        validity_source_time="candle_open",
        validity_window_ms=5_000,
        scope_fields=(),
        scope_sequence_field=None,
        auth_token_env=None,
        auth_hmac_secret_env=None,
        definition_digest="d",
        applied_at_ms=0,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def signed(policy: AuthPolicy, header: str, body: bytes = BODY, now: float = NOW) -> str | None:
    return authenticate(
        policy,
        Credentials(signature=header),
        body,
        now_s=now,
        window_s=300,
        guard=ReplayGuard(300),
        subscription=SUB,
        environment=ENV,
    )


def test_a_correct_signature_is_accepted() -> None:
    header = sig()
    verified = verify(header)
    # The README's signed string, byte for byte.
    signed = f"{NOW}.btc-breakout/paper.".encode() + BODY
    expected = hmac.new(SECRET, signed, hashlib.sha256).hexdigest()
    assert header == f"t={NOW},v2={expected}"
    assert verified.digest == expected
    assert verified.timestamp == NOW


@pytest.mark.parametrize(
    ("sub", "env"),
    [("btc-breakout", "live"), ("eth-breakout", "paper"), ("btc-breakout.paper", "live")],
)
def test_a_signature_is_valid_for_its_own_destination_only(sub: str, env: str) -> None:
    """Same secret, same body, same t: another destination refuses it."""
    with pytest.raises(Unauthorized, match="does not match"):
        verify(sig(), sub=sub, env=env)


def test_the_retired_v1_scheme_is_refused_with_what_to_do() -> None:
    v1 = hmac.new(SECRET, f"{NOW}.".encode() + BODY, hashlib.sha256).hexdigest()
    with pytest.raises(Unauthorized, match="retired scheme") as refused:
        verify(f"t={NOW},v1={v1}")
    assert "v2=" in str(refused.value)


@pytest.mark.parametrize(
    "tamper",
    [
        lambda h, b: (h, b + b" "),  # body changed
        lambda h, b: (h.replace(f"t={NOW}", f"t={NOW + 1}"), b),  # timestamp changed
        lambda h, b: (h[:-1] + ("0" if h[-1] != "0" else "1"), b),  # one hex digit flipped
    ],
    ids=["body", "timestamp", "digest"],
)
def test_a_tampered_signature_is_refused(tamper: object) -> None:
    header, body = tamper(sig(), BODY)  # type: ignore[operator]
    with pytest.raises(Unauthorized, match="does not match"):
        verify(header, body)


def test_a_signature_under_another_secret_is_refused() -> None:
    with pytest.raises(Unauthorized, match="does not match"):
        verify(sig(b"other"))


@pytest.mark.parametrize("age", [301, -301, 10_000])
def test_an_expired_or_future_timestamp_is_refused(age: int) -> None:
    with pytest.raises(Unauthorized, match="outside the 300 s window"):
        verify(sig(now=NOW - age))


@pytest.mark.parametrize("age", [0, 300, -300])
def test_the_window_edges_are_inside(age: int) -> None:
    verify(sig(now=NOW - age))


def test_a_replayed_signature_is_refused_and_a_fresh_one_accepted() -> None:
    policy = AuthPolicy(hmac_secret=SECRET)
    guard = ReplayGuard(300)

    def post(header: str, now: float) -> str | None:
        return authenticate(
            policy,
            Credentials(signature=header),
            BODY,
            now_s=now,
            window_s=300,
            guard=guard,
            subscription=SUB,
            environment=ENV,
        )

    first = sig()
    # One key space for every destination: the digest already names the destination.
    assert post(first, NOW) == verify(first).digest
    with pytest.raises(Unauthorized, match="already used"):
        post(first, NOW + 10)
    # Padding the header with another v2 (or a v1) does not make a replay new.
    with pytest.raises(Unauthorized, match="already used"):
        post(first + ",v2=" + "0" * 64, NOW + 11)
    with pytest.raises(Unauthorized, match="already used"):
        post(first + ",v1=" + "0" * 64, NOW + 11)
    # The same body signed again (a retry done right) is accepted.
    assert post(sig(now=NOW + 12), NOW + 12) is not None
    # After the window the old signature is refused by its timestamp, not remembered forever.
    with pytest.raises(Unauthorized, match="outside"):
        post(first, NOW + 400)


def test_a_released_claim_may_be_used_again() -> None:
    guard = ReplayGuard(300)
    assert guard.claim("k", NOW, NOW)
    assert not guard.claim("k", NOW, NOW + 1)
    guard.release("k")
    assert guard.claim("k", NOW, NOW + 2)


def test_the_replay_guard_forgets_expired_signatures() -> None:
    guard = ReplayGuard(300)
    for i in range(100):
        guard.claim(f"k{i}", NOW, NOW)
    guard.claim("late", NOW + 400, NOW + 400)
    assert len(guard) == 1


@pytest.mark.parametrize(
    "header",
    [
        "",
        "garbage",
        f"t={NOW}",
        "v2=" + "a" * 64,
        f"t=abc,v2={'a' * 64}",
        f"t={NOW},v2=xyz",
        f"t={NOW},t={NOW},v2={'a' * 64}",
        f"t=-5,v2={'a' * 64}",
        f"t={NOW},v2={'a' * 63}",
        ",".join(["x=1"] * 20) + f",t={NOW},v2={'a' * 64}",
        f"t={'9' * 40},v2={'a' * 64}",
        # Digits to Python's \\d and int(), but not ASCII: once a 500 (UnicodeEncodeError).
        f"t=\u0661\u0662\u0663,v2={'a' * 64}",
        f"t=\uff11\uff12\uff13,v2={'a' * 64}",
        f"t=12\u00b3,v2={'a' * 64}",
        f"t={NOW},v2=" + "\u0661" * 64,
    ],
)
def test_a_malformed_signature_header_is_refused(header: str) -> None:
    with pytest.raises(Unauthorized, match="malformed"):
        parse_signature(header)


def test_signature_header_tolerates_spaces_unknown_schemes_and_rotation() -> None:
    good = sig().split(",v2=")[1]
    header = f" t={NOW} , v0=zzz , v2={'0' * 64} , v1={'1' * 64}, v2={good.upper()} "
    verify(header)


def test_tokens_are_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    # auth looks the function up on the hmac module at call time, so this catches its use.
    monkeypatch.setattr(hmac, "compare_digest", spy)
    verify_token(b"tok", "tok")
    with pytest.raises(Unauthorized):
        verify_token(b"tok", "tok2")
    verify(sig())
    assert len(calls) == 3
    assert all(isinstance(a, bytes) and isinstance(b, bytes) for a, b in calls)


def test_a_token_with_undecodable_characters_is_just_wrong() -> None:
    with pytest.raises(Unauthorized, match="does not match"):
        verify_token(b"tok", "\udcff\ud800")


def token_auth(credentials: Credentials, secret: bytes = b"tv-token") -> None:
    authenticate(
        AuthPolicy(token_secret=secret),
        credentials,
        b"",
        now_s=NOW,
        window_s=300,
        guard=ReplayGuard(300),
        subscription=SUB,
        environment=ENV,
    )


def test_a_token_in_the_url_or_the_body_is_accepted() -> None:
    token_auth(Credentials(query_tokens=["tv-token"]))
    token_auth(Credentials(body_token="tv-token"))


@pytest.mark.parametrize(
    ("credentials", "message"),
    [
        (Credentials(), "missing credentials"),
        (Credentials(query_tokens=["nope"]), "does not match"),
        (Credentials(body_token="nope"), "does not match"),
        (Credentials(body_token=123), "must be a string"),
        (Credentials(query_tokens=["tv-token", "tv-token"]), "more than one"),
        (Credentials(query_tokens=["tv-token"], body_token="x"), "more than one"),
        # A signature header does not stand in for the token of a token-only subscription.
        (Credentials(signature=sig(body=b"")), "missing credentials"),
    ],
)
def test_a_bad_or_missing_token_is_refused(credentials: Credentials, message: str) -> None:
    with pytest.raises(Unauthorized, match=message):
        token_auth(credentials)


def test_policy_reads_secrets_from_the_named_variables() -> None:
    wf = workflow(auth_token_env="TV_TOKEN", auth_hmac_secret_env="HOOK_SECRET")
    policy = policy_for(wf, {"TV_TOKEN": "t", "HOOK_SECRET": "h"})
    assert policy == AuthPolicy(token_secret=b"t", hmac_secret=b"h")
    assert not policy.is_open


def test_an_unset_secret_variable_closes_the_subscription_and_names_the_variable() -> None:
    wf = workflow(auth_token_env="TV_TOKEN")
    for environ in ({}, {"TV_TOKEN": ""}):
        policy = policy_for(wf, environ)
        assert not policy.is_open
        with pytest.raises(Unauthorized, match="set the environment variable TV_TOKEN"):
            token_auth_with(policy, Credentials(query_tokens=["anything"]))
        # ... in the log: the answer is the same as for any other refusal.
        with pytest.raises(Unauthorized) as refused:
            token_auth_with(policy, Credentials(query_tokens=["anything"]))
        assert "TV_TOKEN" not in refused.value.message


def token_auth_with(policy: AuthPolicy, credentials: Credentials) -> str | None:
    return authenticate(
        policy,
        credentials,
        b"",
        now_s=NOW,
        window_s=300,
        guard=ReplayGuard(300),
        subscription=SUB,
        environment=ENV,
    )


def test_a_workflow_without_auth_is_open() -> None:
    policy = policy_for(workflow(), {})
    assert policy.is_open
    assert token_auth_with(policy, Credentials()) is None


def test_with_both_declared_a_signed_request_is_judged_by_its_signature() -> None:
    policy = AuthPolicy(token_secret=b"tok", hmac_secret=SECRET)
    # Valid token but a bad signature: refused.
    with pytest.raises(Unauthorized, match="does not match"):
        authenticate(
            policy,
            Credentials(signature=sig(b"wrong"), query_tokens=["tok"]),
            BODY,
            now_s=NOW,
            window_s=300,
            guard=ReplayGuard(300),
            subscription=SUB,
            environment=ENV,
        )
    # No signature: the token decides.
    assert token_auth_with(policy, Credentials(query_tokens=["tok"])) is None
    assert signed(policy, sig()) is not None


def test_no_refusal_message_contains_a_secret_or_token() -> None:
    secret_token = "very-secret-token-value"
    messages: list[str] = []
    for credentials in (
        Credentials(query_tokens=[secret_token + "x"]),
        Credentials(body_token=secret_token[:-1]),
        Credentials(signature=sig(secret_token.encode())),
    ):
        try:
            authenticate(
                AuthPolicy(token_secret=secret_token.encode(), hmac_secret=secret_token.encode()),
                credentials,
                BODY,
                now_s=NOW,
                window_s=300,
                guard=ReplayGuard(300),
                subscription=SUB,
                environment=ENV,
            )
        except Unauthorized as e:
            messages += [str(e), e.message]
    assert messages
    for message in messages:
        assert "secret-token" not in message
