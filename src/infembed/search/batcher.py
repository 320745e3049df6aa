"""The micro-batcher: many concurrent requests, one encoder call.

One encoder call on 32 texts costs far less than 32 calls on one text (bench/search.py prints the ratio), so
the service queues concurrent requests for up to ``max_wait_ms`` (or until ``max_batch`` items) and runs them
in one call on a single worker thread; each request then gets its own rows back.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any


class MicroBatcher:
    """Run ``process(items) -> results`` on the items of many concurrent requests at once.

    ``await batcher.submit(items)`` queues a request's items; a background task waits up to ``max_wait_ms``
    for other requests (or until ``max_batch`` items are queued), calls ``process`` once on all of them in
    ``executor`` (None: asyncio's default pool), and hands each request its own slice of the results. When
    ``process`` fails on a batch of several requests, each request is retried on its own, so the failure goes
    only to the request that causes it (one bad text must not fail the others); the batcher keeps running.
    With ``enabled=False`` every request calls ``process`` on its own (same executor): the bench's baseline.
    """

    def __init__(
        self,
        process: Callable[[list[Any]], Sequence[Any]],
        executor: ThreadPoolExecutor | None,
        *,
        max_batch: int = 64,
        max_wait_ms: float = 2.0,
        enabled: bool = True,
    ):
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self.process = process
        self.executor = executor
        self.max_batch = max_batch
        self.max_wait = max(0.0, max_wait_ms) / 1000.0
        self.enabled = enabled
        self.calls = 0
        self.items = 0
        self.requests = 0
        self.failed_batches = 0
        self._queue: asyncio.Queue | None = None
        self._queued_items = 0
        self._full: asyncio.Event | None = None
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        if self.enabled and self._task is None:
            self._queue = asyncio.Queue()
            self._full = asyncio.Event()
            self._task = asyncio.create_task(self._run(), name="infembed-micro-batcher")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        while self._queue is not None and not self._queue.empty():
            _, future = self._queue.get_nowait()
            if not future.done():
                future.set_exception(RuntimeError("the service is shutting down"))

    def stats(self) -> dict[str, Any]:
        return {
            "enabled": self.enabled,
            "max_batch": self.max_batch,
            "max_wait_ms": self.max_wait * 1000.0,
            "requests": self.requests,
            "encoder_calls": self.calls,
            "items": self.items,
            "failed_batches": self.failed_batches,
        }

    async def submit(self, items: Sequence[Any]) -> list[Any]:
        items = list(items)
        self.requests += 1
        loop = asyncio.get_running_loop()
        if not self.enabled:
            self.calls += 1
            self.items += len(items)
            return list(await loop.run_in_executor(self.executor, self.process, items))
        if self._queue is None:
            raise RuntimeError("MicroBatcher.start() was not called (the app's lifespan did not run)")
        future: asyncio.Future = loop.create_future()
        self._queue.put_nowait((items, future))
        self._queued_items += len(items)
        if self._queued_items >= self.max_batch:
            self._full.set()
        return await future

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        carry: tuple[list[Any], asyncio.Future] | None = None
        while True:
            if carry is not None:
                first, carry = carry, None
            else:
                first = await self._queue.get()
                self._queued_items -= len(first[0])
            batch = [first]
            total = len(first[0])
            if total < self.max_batch and self.max_wait > 0 and self._queued_items + total < self.max_batch:
                self._full.clear()
                with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
                    await asyncio.wait_for(self._full.wait(), self.max_wait)
            while total < self.max_batch and not self._queue.empty():
                entry = self._queue.get_nowait()
                self._queued_items -= len(entry[0])
                if total + len(entry[0]) > self.max_batch:
                    carry = entry  # starts the next batch
                    break
                batch.append(entry)
                total += len(entry[0])
            if self._queued_items < self.max_batch:
                self._full.clear()
            batch = [(items, future) for items, future in batch if not future.done()]  # cancelled requests
            if not batch:
                continue
            flat = [item for items, _ in batch for item in items]
            self.calls += 1
            self.items += len(flat)
            try:
                results = await loop.run_in_executor(self.executor, self.process, flat)
            except Exception as error:
                if len(batch) == 1:
                    if not batch[0][1].done():
                        batch[0][1].set_exception(error)
                    continue
                # Retry each request alone: only the one(s) that cause the failure get it.
                self.failed_batches += 1
                for items, future in batch:
                    if future.done():
                        continue
                    self.calls += 1
                    try:
                        alone = await loop.run_in_executor(self.executor, self.process, items)
                    except Exception as own_error:
                        if not future.done():
                            future.set_exception(own_error)
                    else:
                        if not future.done():
                            future.set_result(list(alone))
                continue
            start = 0
            for items, future in batch:
                if not future.done():
                    future.set_result(list(results[start : start + len(items)]))
                start += len(items)
