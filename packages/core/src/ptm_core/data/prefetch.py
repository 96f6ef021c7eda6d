"""Build the next items on a background thread while the training loop runs the current one.

Fine-tuning featurizes each batch when it is asked for (tokenize with the Rust
``tokenizers`` backend, which releases the GIL, then pad into tensors). On the training
thread that time adds to every step; a thread that builds batch ``i + 1`` during step
``i`` hides it without the start-up, pickling and memory of a DataLoader worker process.
Items come out in order and exceptions are re-raised in the consumer, as if built inline.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar, cast

T = TypeVar("T")

_DONE = object()


def iter_prefetched(
    build: Callable[[int], T], indices: Sequence[int], depth: int = 2
) -> Iterator[T]:
    """Yield ``build(i)`` for each of ``indices`` in order, built ``depth`` items ahead on a
    daemon thread. Closing the iterator early stops the thread after the item it is on.

    Raises:
        Exception: whatever ``build`` raised, at the position it raised.
    """
    if depth < 1:
        raise ValueError(f"prefetch depth must be >= 1, got {depth}")
    items: queue.Queue[object] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                items.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for index in indices:
                if not put(("item", build(index))):
                    return
        except BaseException as error:  # re-raised in the consumer, at its position
            put(("error", error))
            return
        put(_DONE)

    thread = threading.Thread(target=produce, name="ptm-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            got = items.get()
            if got is _DONE:
                return
            kind, value = cast(tuple[str, Any], got)
            if kind == "error":
                raise value
            yield cast(T, value)
    finally:
        stop.set()
        thread.join()


__all__ = ["iter_prefetched"]
