"""The journal state codec (what the gateway's changelog holds per run)."""

from __future__ import annotations

import orjson
import pytest

from streams.core.errors import StateFormatError, UnsupportedStateVersion
from streams.core.journal import RunJournal
from streams.core.journal.state_codec import STATE_FORMAT_VERSION, decode_state, encode_state
from tests.support.journal import SECOND, T0, World, dispatch


def _states() -> list[RunJournal]:
    world = World()
    world.decide(dispatch())
    world.fault = lambda _: "lost"
    world.perform()
    world.now = T0 + 20 * SECOND
    world.crash(origin="backup")  # an open recovery with a fence, an action reconciling
    assert world.state is not None and world.state.recovery is not None
    states = [world.state]
    world.settle()
    assert world.state is not None
    states.append(world.state)
    return states


def test_round_trip_of_a_recovering_and_a_finished_run() -> None:
    for state in _states():
        data = encode_state(state)
        assert orjson.loads(data)[0] == STATE_FORMAT_VERSION
        assert decode_state(data) == state


def test_other_versions_and_garbage_are_refused() -> None:
    state = _states()[0]
    document = orjson.loads(encode_state(state))
    with pytest.raises(UnsupportedStateVersion):
        decode_state(orjson.dumps([2, *document[1:]]))
    with pytest.raises(StateFormatError, match="not JSON"):
        decode_state(b"\xff")
    with pytest.raises(StateFormatError, match="versioned"):
        decode_state(b"{}")
    broken = list(document)
    broken[2][0][3][0] = 7  # the intent's action id is not a string
    with pytest.raises(StateFormatError, match="malformed"):
        decode_state(orjson.dumps(broken))
    short = list(document)
    short[2][0][3] = short[2][0][3][:-1]
    with pytest.raises(StateFormatError, match="fields"):
        decode_state(orjson.dumps(short))


def test_an_exposure_stored_before_the_lot_step_decodes_without_one() -> None:
    """Journal states written before ``ExposureRecorded.lot_step`` existed hold ten exposure
    fields; they decode with ``lot_step`` None, and one field fewer still fails."""
    state = _states()[1]
    document = orjson.loads(encode_state(state))
    exposure_at = 12  # position of the exposure in an encoded action
    [index] = [i for i, a in enumerate(document[2]) if a[exposure_at] is not None]
    document[2][index][exposure_at] = document[2][index][exposure_at][:-1]
    decoded = decode_state(orjson.dumps(document))
    exposure = decoded.actions[index].exposure
    assert exposure is not None and exposure.lot_step is None
    document[2][index][exposure_at] = document[2][index][exposure_at][:-1]
    with pytest.raises(StateFormatError, match="fields"):
        decode_state(orjson.dumps(document))
