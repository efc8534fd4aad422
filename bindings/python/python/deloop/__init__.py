"""deloop: make LLM answers and agents loop-proof.

The guards of the Rust crate ``deloop-core`` as a native package:

* :func:`clamp` cuts repetition loops out of a text (``deloop clamp``);
* :class:`StreamGuard` does it while the text streams in;
* :func:`rescue_json` and :func:`repair_json` recover JSON from broken
  model output (``deloop rescue`` / ``deloop repair``);
* :class:`ToolLoopGuard` judges an agent's tool calls as they happen, and
  :func:`check` replays a whole transcript (``deloop check``);
* :func:`deloop.openai.guard` wraps a streamed ``openai`` or ``anthropic``
  SDK response.

Settings take the config file's names (``words={"max_period": 8}``); a value
out of range raises :class:`InputError` naming the key and its bounds.
"""

from ._native import (
    RELEASE_GIL_BYTES,
    Clamp,
    Cut,
    DeloopError,
    InputError,
    NotFoundError,
    Report,
    StreamGuard,
    ToolLoopGuard,
    Verdict,
    check,
    clamp,
    repair_json,
    rescue_json,
)

__all__ = [
    "RELEASE_GIL_BYTES",
    "Clamp",
    "Cut",
    "DeloopError",
    "InputError",
    "NotFoundError",
    "Report",
    "StreamGuard",
    "ToolLoopGuard",
    "Verdict",
    "check",
    "clamp",
    "repair_json",
    "rescue_json",
]
