"""The filesystem moves a FileStore is made of, made safe once.

``StoreDir`` is a store's root directory: files in its folders (``.leases``, ``.attempts``,
``.summaries``, ``.worker``) are opened relative to the root without following symlinks, so
nothing is ever written outside it, and every store file must be a regular file (a FIFO or a
directory named like one is refused at once, never read or blocked on).
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ...errors import StoreError

# O_NONBLOCK: a FIFO named like a store file must not hang a reader (the mode is checked
# after open); it changes nothing for regular files.
O_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
O_WRITE = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
O_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


class StoreDir:
    """A store's root directory and the folders in it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.prefix = os.path.join(root, "")

    def open_regular(
        self, path: str, flags: int, mode: int = 0o644, *, dir_fd: int | None = None
    ) -> int:
        """Open a file that must be a regular file (``path`` relative to ``dir_fd`` when
        given, a folder of the root); FileNotFoundError passes through, every other problem
        is a StoreError naming the file."""
        try:
            fd = os.open(path, flags, mode, dir_fd=dir_fd)
        except FileNotFoundError:
            raise
        except OSError as e:
            raise self.open_error(_shown(path, dir_fd), e) from None
        try:
            kind = stat.S_IFMT(os.fstat(fd).st_mode)
        except OSError as e:
            os.close(fd)
            raise self.open_error(_shown(path, dir_fd), e) from None
        if kind != stat.S_IFREG:
            os.close(fd)
            what = KINDS.get(kind, "not a regular file")
            shown = _shown(path, dir_fd)
            raise StoreError(f"{shown} is {what}, not a store file: move it out of the store")
        return fd

    def open_error(self, shown: str | Path, e: OSError) -> StoreError:
        """A StoreError that says what is wrong with ``shown``."""
        if e.errno == errno.ELOOP:
            return StoreError(f"{shown} is a symlink; store files must be regular files")
        if e.errno == errno.EISDIR:
            return StoreError(f"{shown} is a directory, not a store file: move it out of the store")
        if e.errno == errno.ENOENT:
            return StoreError(f"store directory {self.root} does not exist")
        return StoreError(f"cannot open {shown}: {e.strerror}")

    @contextmanager
    def folder(self, name: str, *, create: bool) -> Iterator[int | None]:
        """An fd of ``<root>/<name>``, opened without following a symlink (None when it is
        missing and ``create`` is False). A symlink or a non-directory is a StoreError."""
        try:
            root = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as e:
            raise self.open_error(self.root, e) from None
        try:
            try:
                fd: int | None = os.open(name, O_DIR, dir_fd=root)
            except FileNotFoundError:
                fd = self._make_folder(name, root) if create else None
            except OSError as e:
                raise self._folder_error(name, e) from None
        finally:
            os.close(root)
        try:
            yield fd
        finally:
            if fd is not None:
                os.close(fd)

    def _make_folder(self, name: str, root: int) -> int:
        try:
            os.mkdir(name, 0o755, dir_fd=root)
            os.fsync(root)
        except FileExistsError:
            pass
        except OSError as e:
            raise StoreError(f"cannot create {self.root}/{name}: {e.strerror}") from None
        try:
            return os.open(name, O_DIR, dir_fd=root)
        except OSError as e:
            raise self._folder_error(name, e) from None

    def _folder_error(self, name: str, e: OSError) -> StoreError:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            return StoreError(
                f"{self.root}/{name} is a symlink or not a directory; the store only writes "
                "inside its own folder: replace it with a plain directory"
            )
        return StoreError(f"cannot open {self.root}/{name}: {e.strerror}")

    def read_file(self, folder: str, name: str) -> bytes | None:
        """A file under ``<root>/<folder>``; None when it (or the folder) is missing."""
        with self.folder(folder, create=False) as dfd:
            if dfd is None:
                return None
            try:
                fd = self.open_regular(name, O_READ, dir_fd=dfd)
            except FileNotFoundError:
                return None
        try:
            return pread_all(fd, os.fstat(fd).st_size, 0)
        except OSError as e:
            raise StoreError(f"cannot read {self.root}/{folder}/{name}: {e.strerror}") from None
        finally:
            os.close(fd)

    def write_file(self, folder: str, name: str, data: bytes) -> None:
        """Replace ``<root>/<folder>/<name>`` atomically (see :func:`replace_in`)."""
        with self.folder(folder, create=True) as dfd:
            assert dfd is not None
            try:
                replace_in(dfd, name, data)
            except OSError as e:
                raise StoreError(
                    f"cannot write {self.root}/{folder}/{name}: {e.strerror}"
                ) from None

    def append_line(self, folder: str, name: str, line: bytes, *, sync: bool) -> None:
        """Append one line to a log under ``<root>/<folder>`` in one write (O_APPEND)."""
        with self.folder(folder, create=True) as dfd:
            assert dfd is not None
            fd = self.open_regular(name, O_APPEND, dir_fd=dfd)
        try:
            write_all(fd, line)
            if sync:
                os.fsync(fd)
        except OSError as e:
            raise StoreError(f"cannot write {self.root}/{folder}/{name}: {e.strerror}") from None
        finally:
            os.close(fd)

    def remove(self, folder: str, name: str) -> bool:
        """Remove a file under ``<root>/<folder>``; False when it was not there."""
        with self.folder(folder, create=False) as dfd:
            if dfd is None:
                return False
            try:
                os.unlink(name, dir_fd=dfd)
            except FileNotFoundError:
                return False
            except OSError as e:
                raise StoreError(
                    f"cannot remove {self.root}/{folder}/{name}: {e.strerror}"
                ) from None
        return True

    def listing(self, folder: str, suffix: str) -> list[str]:
        """The stems of the regular files in ``<root>/<folder>`` ending in ``suffix``."""
        with self.folder(folder, create=False) as dfd:
            if dfd is None:
                return []
            with os.scandir(dfd) as entries:
                return [
                    e.name[: -len(suffix)]
                    for e in entries
                    if e.name.endswith(suffix)
                    and not e.name.startswith(".")
                    and e.is_file(follow_symlinks=False)
                ]


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a reader sees the old file or the new one, never
    a part: a temp file beside it (named per process and thread), fsynced, renamed over it,
    then the folder fsynced. Creates the folder when it is missing. On any failure the temp
    file is removed and the old file is left whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        replace_in(fd, path.name, data)
    finally:
        os.close(fd)


def replace_in(dir_fd: int, name: str, data: bytes) -> None:
    """write_atomically inside the folder ``dir_fd``; never follows a symlink."""
    tmp = f".{name}.{os.getpid()}.{threading.get_ident()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o644, dir_fd=dir_fd)
    try:
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    os.fsync(dir_fd)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def pread_all(fd: int, n: int, offset: int) -> bytes:
    parts = []
    while n > 0:
        b = os.pread(fd, n, offset)
        if not b:
            break
        parts.append(b)
        n -= len(b)
        offset += len(b)
    return b"".join(parts)


def count_lines(fd: int, upto: int) -> int:
    """The 1-based number of the last complete line ending at byte ``upto``."""
    return pread_all(fd, upto, 0).count(b"\n")


def truncate_quietly(fd: int, size: int) -> None:
    with suppress(OSError):
        os.ftruncate(fd, size)


def _shown(path: str, dir_fd: int | None) -> str:
    return path if dir_fd is None else fd_path(dir_fd, path)


def fd_path(dir_fd: int, name: str) -> str:
    """The path of ``name`` in the open folder ``dir_fd``, for messages."""
    try:
        return os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), name)
    except OSError:
        return name


def fsync_dir(path: Path | str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
