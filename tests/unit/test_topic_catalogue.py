"""The topic catalogue (``schemas/topics.py``) declares each topic once, and derived lists
(the projected topics) name each once."""

from __future__ import annotations

from collections import Counter

from schemas.topics import TOPICS, named, projected


def test_every_topic_is_declared_once() -> None:
    twice = [name for name, n in Counter(spec.name for spec in TOPICS).items() if n > 1]
    assert twice == []


def test_the_projected_topics_name_each_topic_once() -> None:
    names = [spec.name for spec in projected()]
    assert len(names) == len(set(names))


def test_a_topic_is_found_by_its_name() -> None:
    for spec in TOPICS:
        assert named(spec.name) is spec
