"""Helpers for scripted end-to-end runs."""

from __future__ import annotations

import asyncio


class Gate:
    """An asyncio.Event with a name, for proving order without sleeps."""

    def __init__(self) -> None:
        self.event = asyncio.Event()

    def open(self) -> None:
        self.event.set()

    async def wait(self, timeout: float = 5.0) -> None:
        await asyncio.wait_for(self.event.wait(), timeout)
