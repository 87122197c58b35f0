"""Compiled capture scanner (see placer.capture.scan)."""

from typing import Annotated

import numpy
from numpy.typing import NDArray


VERSION: int = 2

class Scanner:
    """Streaming scanner of a capture's transfers arrays."""

    def __init__(self, *, nonce: bytes, max_tiles: int, max_words: int, address_limit: int, align: int, word_bytes: int) -> None: ...

    def feed(self, chunk: bytes, final: bool = False) -> bool:
        """
        Parse the next piece of the text (`final`: the last one); False once the text is rejected.
        """

    def finish(self) -> tuple[bytes, list[tuple[Annotated[NDArray[numpy.int32], dict(shape=(None,))], Annotated[NDArray[numpy.int32], dict(shape=(None,))], Annotated[NDArray[numpy.uint8], dict(shape=(None,))], Annotated[NDArray[numpy.int64], dict(shape=(None,))], Annotated[NDArray[numpy.int64], dict(shape=(None,))], Annotated[NDArray[numpy.int64], dict(shape=(None,))], Annotated[NDArray[numpy.int32], dict(shape=(None,))], Annotated[NDArray[numpy.int64], dict(shape=(None,))]]], int, bool]:
        """
        (rest, regions, max_tile, bad): the text outside the transfers arrays, each array's columns, the largest tile seen (-1: none) and whether a range check failed.
        """
