"""Replace a file whole or not at all: a temp file in the same folder, then ``os.replace``.

The temp file is created as any new file is (mode 0666 less the umask: 0644 usually), not 0600 as
``tempfile.mkstemp`` makes it, so every artifact is as readable as results.jsonl (pytest's cacheprovider
fixed the same mkstemp trap). An interrupt leaves the old file as it was and no temp file behind.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

__all__ = ["open_atomic", "write_bytes_atomic"]


@contextlib.contextmanager
def open_atomic(path: Path, *, mode: int | None = None, fsync: bool = False) -> Iterator[BinaryIO]:
    """A binary file to write ``path``'s new content into, piece by piece; it replaces ``path`` when the block
    ends, and is removed instead when the block raises. ``mode``: the file's permission bits (default: a new
    file's); ``fsync``: flush to the disk before the rename (a file the user wrote, not a rebuildable artifact)."""
    while True:
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:  # another writer's temp name: draw again
            continue
        break
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_bytes_atomic(path: Path, data: bytes, *, mode: int | None = None, fsync: bool = False) -> None:
    """Write ``data`` to ``path`` atomically (:func:`open_atomic`)."""
    with open_atomic(path, mode=mode, fsync=fsync) as fh:
        fh.write(data)
