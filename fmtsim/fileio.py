"""Writing files so that nothing is ever left half-written under its final name, and nothing
but a regular file that is not one of the command's own inputs is ever replaced.

Every fmtsim command that writes goes through :func:`atomic_write` (or the checkpoint
package's shard writer, which uses :func:`check_replaceable`): the data goes to a new
temporary name beside the target, is flushed to disk, and is renamed over the target. A rename
replaces whatever the name held, so the target is checked first: a device node (``/dev/null``,
``/dev/full``), a directory, a FIFO, a socket or a symbolic link is refused, as is a file that
is one of the command's inputs (reading A and writing D to the same ``a.npy`` would destroy A).
"""

from __future__ import annotations

import os
import stat
import uuid
from collections.abc import Iterable
from pathlib import Path

__all__ = ["UnsafeOutputError", "atomic_write", "check_replaceable"]

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"))


class UnsafeOutputError(ValueError):
    """An output name whose rename would replace something other than a regular file, or an input."""


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def check_replaceable(path: str | Path, inputs: Iterable[str | Path | None] = (), what: str = "output") -> Path:
    """``path`` as a Path, if writing it by rename is safe: it does not exist, or it is a regular
    file (not a link to one) that is none of ``inputs`` (``None`` entries are ignored). Raises
    :class:`UnsafeOutputError` naming ``what``, the path, and what it is."""
    p = Path(path)
    if not str(path):
        raise UnsafeOutputError(f"{what}: the path is empty")
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return p
    except OSError as e:
        raise UnsafeOutputError(f"{what} {p}: cannot be examined ({e.strerror or e})") from None
    for test, kind in _KINDS:
        if test(st.st_mode):
            raise UnsafeOutputError(f"{what} {p} is {kind}, not a regular file: fmtsim writes through a "
                                    "temporary name and a rename, which would replace it; name a file")
    for inp in inputs:
        if inp is None or not str(inp):
            continue
        try:
            ist = os.stat(inp)
        except OSError:
            continue
        if _same_file(st, ist):
            raise UnsafeOutputError(f"{what} {p} is the input {inp}: writing it would destroy that input; "
                                    "name another file")
    return p


def atomic_write(path: str | Path, data: bytes | str, inputs: Iterable[str | Path | None] = (),
                 what: str = "output") -> None:
    """Write ``data`` to a new temporary name beside ``path``, fsync it, then rename it into place.

    Refuses (:class:`UnsafeOutputError`, before anything is written) a ``path`` that
    :func:`check_replaceable` refuses. The temporary name is created exclusively, so an existing
    file or link of that name is never followed or overwritten; it is removed on any failure.
    """
    p = check_replaceable(path, inputs, what)
    raw = data.encode() if isinstance(data, str) else data
    tmp = p.with_name(f".{p.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        check_replaceable(p, inputs, what)  # nothing swapped in under the name while we wrote
        os.replace(tmp, p)
    finally:
        tmp.unlink(missing_ok=True)
