"""The workflow table as the event loop sees it: a snapshot that never blocks the loop.

:class:`streams.adapters.workflow_table.WorkflowTable` is blocking and holds its lock while it
catches up (up to its timeout when Kafka is slow), so the loop never touches it. All table calls run
on one dedicated thread; after each catch-up the thread publishes a fresh snapshot dict,
which the loop reads without locking (replacing a dict reference is atomic).

Freshness guarantees of :meth:`WorkflowDirectory.find`:

- a known destination is answered from the snapshot, which a background refresh renews every
  ``refresh_interval_s`` (so a new revision, e.g. a changed auth variable, applies within
  about that long);
- an unknown destination is answered from a snapshot whose catch-up started at most
  ``fresh_s`` before the request: the current one if it is that recent, else the next
  catch-up (one in flight that started recently enough is shared). So a workflow applied
  more than ``fresh_s`` before a request is found, and a flood of made-up names costs Kafka
  at most one catch-up per ``fresh_s``, however many names it makes up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from concurrent.futures import ThreadPoolExecutor

from consumers.ingest.errors import BrokerUnavailable
from schemas.events import WorkflowRevised
from streams.adapters.workflow_table import WorkflowTable

log = logging.getLogger("sluicegate.ingest.workflows")

Snapshot = dict[tuple[str, str], WorkflowRevised]


class WorkflowDirectory:
    """Non-blocking lookups of workflow destinations over a :class:`WorkflowTable`."""

    def __init__(
        self,
        table: WorkflowTable,
        *,
        refresh_interval_s: float = 2.0,
        fresh_s: float = 0.5,
        catch_up_timeout_s: float = 5.0,
    ) -> None:
        self._table = table
        self._refresh_interval_s = refresh_interval_s
        self._fresh_s = fresh_s
        self._catch_up_timeout_s = catch_up_timeout_s
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ingest-workflows")
        self._snapshot: Snapshot = {}
        # When the catch-up that produced the snapshot started (monotonic seconds).
        self._snapshot_started = float("-inf")
        self._loaded = False
        self._next: asyncio.Future[None] | None = None
        self._in_flight: asyncio.Future[None] | None = None
        self._in_flight_started = float("-inf")
        self._serial = asyncio.Lock()
        self._last_start = float("-inf")
        self._background: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def loaded(self) -> bool:
        """Whether the table has been read to its end at least once."""
        return self._loaded

    def start(self) -> None:
        """Start the periodic background refresh (the first one begins at once)."""
        self._background = asyncio.get_running_loop().create_task(self._refresh_forever())

    async def find(
        self, subscription: str, environment: str, timeout_s: float
    ) -> WorkflowRevised | None:
        """The current revision for the destination, or ``None`` if none is applied.

        Raises :class:`~consumers.ingest.errors.BrokerUnavailable` (caused by the table's
        :class:`~streams.errors.KafkaUnavailable`, if it raised one) when an unknown destination
        cannot be confirmed unknown within ``timeout_s`` (no recent enough snapshot, and the
        table could not be read).
        """
        found = self._snapshot.get((subscription, environment))
        if found is not None:
            return found
        not_before = time.monotonic() - self._fresh_s
        if self._loaded and self._snapshot_started >= not_before:
            return None
        if self._in_flight is not None and self._in_flight_started >= not_before:
            pending = self._in_flight
        else:
            pending = self.refresh()
        # The caller is not authenticated yet: the broker's own words go to the log only.
        try:
            await asyncio.wait_for(asyncio.shield(pending), max(timeout_s, 0.0))
        except TimeoutError:
            raise BrokerUnavailable(
                "the workflow table could not be read from Kafka in time; retry",
                headers={"Retry-After": "2"},
                detail=f"no workflow catch-up finished within {timeout_s:g} s",
            ) from None
        except Exception as e:
            raise BrokerUnavailable(
                "the workflow table could not be read from Kafka; retry",
                headers={"Retry-After": "2"},
                detail=f"workflow table catch-up failed: {e}",
            ) from e
        return self._snapshot.get((subscription, environment))

    def refresh(self) -> asyncio.Future[None]:
        """A future for a catch-up that starts after this call; concurrent callers share it."""
        if self._next is None:
            loop = asyncio.get_running_loop()
            self._next = loop.create_future()
            self._next.add_done_callback(_retrieve)
            task = loop.create_task(self._run_next())
            # The loop keeps only weak references to tasks.
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return self._next

    async def _run_next(self) -> None:
        async with self._serial:
            # Spaced even when catch-ups fail at once (broker down): never a busy loop.
            gap = self._fresh_s - (time.monotonic() - self._last_start)
            if gap > 0:
                await asyncio.sleep(gap)
            # Callers registered up to here are served by the catch-up that starts now;
            # later callers get the next one (or share this one while it is recent).
            done, self._next = self._next, None
            assert done is not None
            started = self._last_start = time.monotonic()
            self._in_flight, self._in_flight_started = done, started
            loop = asyncio.get_running_loop()
            try:
                snapshot = await loop.run_in_executor(self._executor, self._catch_up)
            except Exception as e:
                if not done.done():
                    done.set_exception(e)
                return
            finally:
                self._in_flight = None
            self._snapshot, self._snapshot_started = snapshot, started
            self._loaded = True
            # A waiter may have gone (cancelled at shutdown); the snapshot is taken anyway.
            if not done.done():
                done.set_result(None)

    def _catch_up(self) -> Snapshot:
        self._table.catch_up(timeout_s=self._catch_up_timeout_s)
        return {(w.subscription, w.environment): w for w in self._table.all()}

    async def _refresh_forever(self) -> None:
        while True:
            try:
                # Shielded: cancelling this loop at close must not cancel the future that
                # requests share.
                await asyncio.shield(self.refresh())
            except Exception as e:
                log.warning("workflow table refresh failed: %s", e)
            await asyncio.sleep(self._refresh_interval_s)

    async def close(self) -> None:
        """Stop refreshing and close the table (its consumer)."""
        if self._background is not None:
            self._background.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._background
        async with self._serial:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(self._executor, self._table.close)
        self._executor.shutdown(wait=True)


def _retrieve(future: asyncio.Future[None]) -> None:
    # Mark a failed refresh as seen: whoever cared already got the exception.
    if not future.cancelled():
        future.exception()
