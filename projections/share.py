"""A share of the source partitions: what one worker of a parallel rebuild, or one of several
live projectors (``sluicegate projector --share K/N``), projects."""

from __future__ import annotations

from dataclasses import dataclass

from streams.text import parse_whole


@dataclass(frozen=True)
class Share:
    """The partitions whose number is :attr:`index` modulo :attr:`count`, of every topic.

    Split by partition number, not by topic: a record's key picks the same partition number
    in every topic with the same partition count, so one share holds all of a key's rows.
    """

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count:
            raise ValueError(f"share {self.index} of {self.count} does not exist")

    def __contains__(self, partition: tuple[str, int]) -> bool:
        return partition[1] % self.count == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @classmethod
    def parse(cls, text: str) -> Share:
        """``"K/N"`` (``0 <= K < N``); :class:`ValueError` saying what is expected."""
        index_text, slash, count_text = text.strip().partition("/")
        index, count = parse_whole(index_text.strip(), 1024), parse_whole(count_text.strip(), 1024)
        if slash and index is not None and count is not None and index < count:
            return cls(index, count)
        raise ValueError(
            f"share {text!r}: expected K/N with 0 <= K < N, such as 0/2 and 1/2 for two "
            "projectors (K/N projects the partitions whose number is K modulo N)"
        )
