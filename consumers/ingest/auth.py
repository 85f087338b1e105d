"""Who may post to a subscription: HMAC signatures, secret tokens, or nobody-checks (open).

Pure: no I/O, no clock reads (``now_s`` is passed in), no logging. Every comparison of a
secret-derived value uses :func:`hmac.compare_digest`. Refusals are :class:`Unauthorized`,
whose answer is the same for every reason; the reason (``str(error)``) is for ingest's log
and never contains a secret, a token, a signature or any part of the body.

Policy, per workflow destination (``[workflow.auth]``):

- ``hmac_secret_env = "VAR"``: the sender signs. Header
  ``X-Sluicegate-Signature: t=<unix seconds>,v2=<hex HMAC-SHA256(secret, signed string)>``
  where the signed string is ``"<t>.<subscription>/<environment>." + body`` (see
  :func:`signed_string`). The destination is part of what is signed, so a request captured
  on its way to one destination is refused by every other, even one sharing the secret.
  ``t`` must be within the replay window of now (either way, to allow clock skew), and a
  signature is accepted once: the same signature again within the window is a replay,
  whichever destination it is sent to. More than one ``v2=`` may be given (secret
  rotation); one match suffices. ``v1=`` (the retired scheme that signed ``"<t>." + body``
  only) is refused.
- ``token_env = "VAR"``: for senders that cannot sign (TradingView). The secret token comes in
  ``?token=`` or in a top-level ``"token"`` body field; the caller removes the body field
  before the payload goes anywhere.
- Both declared: a request with a signature header is judged by its signature only; one
  without is judged by its token.
- Neither declared: the destination is *open*; anyone who can reach ingest can post to it.
- A declared variable that is unset or empty in ingest's environment closes the destination:
  every request is refused (the log names the variable). Never open by default.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from consumers.ingest.errors import Unauthorized
from schemas.events import WorkflowRevised

SIGNATURE_HEADER = "X-Sluicegate-Signature"

SCHEME = "v2"
RETIRED_SCHEMES = ("v1",)

# ASCII only, matched whole: ``\d`` (and ``int()``) also accept the digits of other scripts.
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_HEX_SHA256 = re.compile(r"[0-9a-fA-F]{64}")
# A header with more parts than this is not a signature header anyone wrote on purpose.
_MAX_PARTS = 8


@dataclass(frozen=True)
class AuthPolicy:
    """The secrets one destination checks; ``unset`` names declared variables with no value."""

    token_secret: bytes | None = None
    hmac_secret: bytes | None = None
    unset: tuple[str, ...] = ()

    @property
    def is_open(self) -> bool:
        return self.token_secret is None and self.hmac_secret is None and not self.unset


def policy_for(workflow: WorkflowRevised, environ: Mapping[str, str]) -> AuthPolicy:
    """The destination's policy, reading the secrets from ``environ`` (names from the workflow)."""
    unset: list[str] = []

    def secret(var: str | None) -> bytes | None:
        if var is None:
            return None
        value = environ.get(var, "")
        if not value:
            unset.append(var)
            return None
        # os.environ decodes with surrogateescape; encoding back gives the original bytes.
        return value.encode("utf-8", "surrogateescape")

    token = secret(workflow.auth_token_env)
    signing = secret(workflow.auth_hmac_secret_env)
    return AuthPolicy(token_secret=token, hmac_secret=signing, unset=tuple(unset))


def signed_string(timestamp: str, subscription: str, environment: str, body: bytes) -> bytes:
    """What a ``v2`` signature covers: ``"<t>.<subscription>/<environment>." + body``.

    Unambiguous: ``t`` is ASCII digits, a subscription name never contains ``/`` and an
    environment is ``paper`` or ``live``, so no two (t, destination, body) give one string.
    """
    return f"{timestamp}.{subscription}/{environment}.".encode() + body


def signature_of(
    secret: bytes, timestamp: str, subscription: str, environment: str, body: bytes
) -> str:
    """Hex HMAC-SHA256 of :func:`signed_string` under ``secret``."""
    message = signed_string(timestamp, subscription, environment, body)
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def sign(secret: bytes, timestamp: int, subscription: str, environment: str, body: bytes) -> str:
    """The header value a sender attaches to ``body`` for one destination, at ``timestamp``."""
    digest = signature_of(secret, str(timestamp), subscription, environment, body)
    return f"t={timestamp},{SCHEME}={digest}"


@dataclass(frozen=True)
class ParsedSignature:
    """A syntactically valid signature header: ``t`` as sent and as a number, and the v1s."""

    timestamp_text: str
    timestamp: int
    candidates: tuple[str, ...]


@dataclass(frozen=True)
class VerifiedSignature:
    """A signature that matched: its timestamp and the matching hex digest."""

    timestamp: int
    digest: str


def parse_signature(header: str) -> ParsedSignature:
    """Parse ``t=<digits>,v2=<64 hex>[,v2=...]``; unknown keys are ignored (future schemes).

    Raises :class:`Unauthorized` when the header is not of that form, or carries only
    signatures of a retired scheme.
    """
    malformed = Unauthorized(
        f"malformed {SIGNATURE_HEADER} header: expected t=<unix seconds>,{SCHEME}=<hex HMAC-SHA256>"
    )
    parts = header.split(",")
    if len(parts) > _MAX_PARTS:
        raise malformed
    timestamps: list[str] = []
    candidates: list[str] = []
    retired = False
    for part in parts:
        key, sep, value = part.strip().partition("=")
        if not sep:
            raise malformed
        key, value = key.strip(), value.strip()
        if key == "t":
            timestamps.append(value)
        elif key == SCHEME:
            if not _HEX_SHA256.fullmatch(value):
                raise malformed
            candidates.append(value.lower())
        elif key in RETIRED_SCHEMES:
            retired = True
    if not candidates and retired:
        raise Unauthorized(
            f"{SIGNATURE_HEADER} carries only v1= signatures, a retired scheme that did not "
            f'cover the destination: the sender must sign "<t>.<subscription>/<environment>." '
            f"+ body and send it as {SCHEME}= (see the README)"
        )
    if len(timestamps) != 1 or not _TIMESTAMP.fullmatch(timestamps[0]) or not candidates:
        raise malformed
    return ParsedSignature(timestamps[0], int(timestamps[0]), tuple(candidates))


def verify_signature(
    secret: bytes,
    header: str,
    body: bytes,
    *,
    subscription: str,
    environment: str,
    now_s: float,
    window_s: float,
) -> VerifiedSignature:
    """Check the signature header over ``body`` for the destination; return what matched.

    Refuses (:class:`Unauthorized`) a malformed header, a signature that matches no ``v2``
    (tampered body or timestamp, another destination, wrong secret), and a ``t`` more than
    ``window_s`` away from ``now_s``.
    """
    parsed = parse_signature(header)
    digest = signature_of(secret, parsed.timestamp_text, subscription, environment, body)
    expected = digest.encode("ascii")
    # Every candidate is compared (no early exit) so timing does not tell which one matched.
    matched = False
    for candidate in parsed.candidates:
        matched |= hmac.compare_digest(expected, candidate.encode("ascii"))
    if not matched:
        raise Unauthorized(
            f"{SIGNATURE_HEADER} does not match: another body, timestamp, destination or secret"
        )
    if abs(now_s - parsed.timestamp) > window_s:
        raise Unauthorized(
            f"{SIGNATURE_HEADER} timestamp is outside the {window_s:g} s window: sign each "
            "request with the current time (and check the sender's clock)"
        )
    return VerifiedSignature(parsed.timestamp, digest)


def verify_token(secret: bytes, presented: str) -> None:
    """Refuse (:class:`Unauthorized`) unless ``presented`` equals the secret token."""
    # surrogatepass: a query string with undecodable bytes must compare unequal, not crash.
    if not hmac.compare_digest(secret, presented.encode("utf-8", "surrogatepass")):
        raise Unauthorized("token does not match")


class ReplayGuard:
    """Signatures accepted within the replay window; a second use of one is a replay.

    A signature is remembered until its own ``t`` leaves the window, after which the
    timestamp check refuses it anyway, so memory is bounded by the rate of *valid* signed
    requests times the window. Not thread-safe: used from the event loop only.
    """

    def __init__(self, window_s: float) -> None:
        self._window_s = window_s
        self._until: dict[str, float] = {}
        self._last_prune = float("-inf")

    def __len__(self) -> int:
        return len(self._until)

    def claim(self, key: str, timestamp: int, now_s: float) -> bool:
        """Reserve ``key``; ``False`` if it is already reserved (a replay)."""
        self._prune(now_s)
        until = self._until.get(key)
        if until is not None and until >= now_s:
            return False
        self._until[key] = timestamp + self._window_s
        return True

    def release(self, key: str) -> None:
        """Forget ``key``: the request that claimed it produced nothing, so it may come again."""
        self._until.pop(key, None)

    def _prune(self, now_s: float) -> None:
        if now_s - self._last_prune < 1.0:
            return
        self._last_prune = now_s
        for key in [k for k, until in self._until.items() if until < now_s]:
            del self._until[key]


@dataclass(frozen=True)
class Credentials:
    """What a request presented: the signature header, ``?token=`` values, the body token."""

    signature: str | None = None
    query_tokens: Sequence[str] = ()
    body_token: object = None


def authenticate(
    policy: AuthPolicy,
    credentials: Credentials,
    body: bytes,
    *,
    now_s: float,
    window_s: float,
    guard: ReplayGuard,
    subscription: str,
    environment: str,
) -> str | None:
    """Refuse (:class:`Unauthorized`) unless the request may post to the destination.

    Returns the replay-guard key the request claimed (signed requests), else ``None``. The
    caller releases the key if the request ends without producing anything, so that a
    sender may repeat an identical signed request that was refused for another reason.
    """
    if policy.unset:
        names = " and ".join(policy.unset)
        raise Unauthorized(
            f"{subscription}/{environment} requires a secret that is not configured: set the "
            f"environment variable {names} for sluicegate ingest and restart it"
        )
    if policy.is_open:
        return None
    if policy.hmac_secret is not None and credentials.signature is not None:
        verified = verify_signature(
            policy.hmac_secret,
            credentials.signature,
            body,
            subscription=subscription,
            environment=environment,
            now_s=now_s,
            window_s=window_s,
        )
        # Keyed by the digest that matched (not by the header text, which a replayer could
        # pad with extra v2 values). The digest commits to t, the destination and the body,
        # so one key space serves every destination.
        key = verified.digest
        if not guard.claim(key, verified.timestamp, now_s):
            raise Unauthorized(
                f"{SIGNATURE_HEADER} was already used: sign every request anew, even a retry"
            )
        return key
    if policy.token_secret is not None:
        presented = _one_token(credentials)
        if presented is not None:
            verify_token(policy.token_secret, presented)
            return None
    wanted = []
    if policy.hmac_secret is not None:
        wanted.append(f"an {SIGNATURE_HEADER} header")
    if policy.token_secret is not None:
        wanted.append('a token in ?token= or in a "token" body field')
    raise Unauthorized("missing credentials: this subscription requires " + " or ".join(wanted))


def _one_token(credentials: Credentials) -> str | None:
    presented: list[str] = list(credentials.query_tokens)
    if credentials.body_token is not None:
        if not isinstance(credentials.body_token, str):
            raise Unauthorized('the "token" body field must be a string')
        presented.append(credentials.body_token)
    if len(presented) > 1:
        raise Unauthorized("more than one token was given: send it once")
    return presented[0] if presented else None
