"""Guard a streamed reply of the ``openai`` or ``anthropic`` SDK.

``guard(stream)`` takes what the SDK returns for a streamed request (a sync
or async iterator of events) and iterates over the text deltas that are safe
to show. When the loop guard cuts, the last delta ends with the marker and
the SDK stream is closed, which closes its HTTP response, so the server
stops generating::

    from openai import OpenAI
    import deloop.openai

    client = OpenAI()
    stream = client.chat.completions.create(model="gpt-4o-mini", messages=msgs, stream=True)
    guarded = deloop.openai.guard(stream)
    for text in guarded:
        print(text, end="", flush=True)
    if guarded.cut:
        print(f"\\n(loop cut: {guarded.cut.detector})")

Understood events: chat completion chunks (``choices[0].delta.content``),
Responses API ``response.output_text.delta`` events, and Anthropic
``content_block_delta`` events with a ``text_delta``. Other events pass
unseen. Settings are those of :class:`deloop.StreamGuard`.
"""

import inspect
from typing import Any, AsyncIterator, Iterator, Optional, Union

from ._native import Cut, StreamGuard

__all__ = ["guard", "GuardedStream", "AsyncGuardedStream", "text_delta"]


def text_delta(event: Any) -> Optional[str]:
    """The text an SDK stream event adds to the reply's first choice, if any."""
    choices = getattr(event, "choices", None)
    if choices is not None:
        parts = []
        for choice in choices:
            if getattr(choice, "index", 0) != 0:
                continue
            delta = getattr(choice, "delta", None)
            content = getattr(delta, "content", None) if delta is not None else None
            if isinstance(content, str):
                parts.append(content)
        return "".join(parts) or None
    kind = getattr(event, "type", None)
    if kind == "response.output_text.delta":
        delta = getattr(event, "delta", None)
        return delta if isinstance(delta, str) else None
    if kind == "content_block_delta":
        delta = getattr(event, "delta", None)
        if getattr(delta, "type", None) == "text_delta":
            text = getattr(delta, "text", None)
            return text if isinstance(text, str) else None
    return None


class GuardedStream:
    """The safe text deltas of a sync SDK stream (see :func:`guard`)."""

    def __init__(self, stream: Any, guard: StreamGuard) -> None:
        self._stream = stream
        self._guard = guard
        self._done = False

    @property
    def cut(self) -> Optional[Cut]:
        """The cut, once the loop guard fired."""
        return self._guard.cut

    def __iter__(self) -> Iterator[str]:
        if self._done:
            return
        self._done = True
        try:
            for event in self._stream:
                delta = text_delta(event)
                if delta is None:
                    continue
                safe = self._guard.push(delta)
                if safe:
                    yield safe
                if self._guard.cut is not None:
                    return
            rest = self._guard.finish()
            if rest:
                yield rest
        finally:
            # On a cut (or when the caller stops early) the response is
            # closed, so the server stops generating.
            self.close()

    def close(self) -> None:
        """Closes the SDK stream and its HTTP response."""
        close = getattr(self._stream, "close", None)
        if close is not None:
            close()


class AsyncGuardedStream:
    """The safe text deltas of an async SDK stream (see :func:`guard`)."""

    def __init__(self, stream: Any, guard: StreamGuard) -> None:
        self._stream = stream
        self._guard = guard
        self._done = False

    @property
    def cut(self) -> Optional[Cut]:
        """The cut, once the loop guard fired."""
        return self._guard.cut

    async def __aiter__(self) -> AsyncIterator[str]:
        if self._done:
            return
        self._done = True
        try:
            async for event in self._stream:
                delta = text_delta(event)
                if delta is None:
                    continue
                safe = self._guard.push(delta)
                if safe:
                    yield safe
                if self._guard.cut is not None:
                    return
            rest = self._guard.finish()
            if rest:
                yield rest
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        """Closes the SDK stream and its HTTP response."""
        close = getattr(self._stream, "close", None)
        if close is None:
            close = getattr(self._stream, "aclose", None)
        if close is not None:
            result = close()
            if inspect.isawaitable(result):
                await result


def guard(stream: Any, **settings: Any) -> Union[GuardedStream, AsyncGuardedStream]:
    """Wraps a streamed ``openai`` / ``anthropic`` SDK response (sync or
    async); iterate over the result for the safe text deltas."""
    g = StreamGuard(**settings)
    if hasattr(stream, "__aiter__"):
        return AsyncGuardedStream(stream, g)
    return GuardedStream(stream, g)
