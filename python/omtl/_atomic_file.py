"""Writing a file whole or not at all, also across a crash: model files (``omtl.save``) and the
files of a sharded model's checkpoint (``omtl.dask``) go through ``write_atomically``."""

from __future__ import annotations

import hashlib
import os
import socket
import stat
import tempfile

# Temporary files: ".<name>.<host>-<pid>-<random>.omtl-tmp" in the target's directory.
TMP_SUFFIX = ".omtl-tmp"
HOST_TAG = hashlib.sha256(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:8]


def write_atomically(path, data: bytes) -> None:
    """Replaces ``path`` by a file holding ``data``, whole or not at all, also across a crash.

    The bytes go to a fresh temporary file in the target's directory, created with O_EXCL under
    an unpredictable name (so concurrent savers never share one, and a planted symlink is never
    followed), flushed to disk, given the mode of the file it replaces (or the mode a new file
    gets under the umask), and renamed over the target; then the directory entry is flushed.
    A crash leaves the old file or the new one, and at most a temporary file, which a later save
    to the same path removes once its writer process is gone.
    """
    path = os.fspath(path)
    directory, name = os.path.split(os.path.abspath(path))
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    _remove_stale_temporaries(directory, name)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.{HOST_TAG}-{os.getpid()}-", suffix=TMP_SUFFIX, dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if hasattr(os, "fchmod"):
                os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_directory(directory)


def _umask() -> int:
    """The process umask, read without changing it where the system tells it (Linux)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_directory(directory: str) -> None:
    """Flushes a directory's entries (the rename) to disk, where the system can (POSIX)."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems do not sync directories; the rename itself is still atomic
    finally:
        os.close(fd)


def _remove_stale_temporaries(directory: str, name: str) -> None:
    """Removes the temporary files of saves to ``name`` whose writer process (on this host) no
    longer exists: what a crash during a save leaves. Other hosts' temporaries are left alone."""
    prefix = f".{name}.{HOST_TAG}-"
    try:
        entries = [e for e in os.listdir(directory) if e.startswith(prefix) and e.endswith(TMP_SUFFIX)]
    except OSError:
        return
    for entry in entries:
        pid = entry[len(prefix) :].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid() or _process_exists(int(pid)):
            continue
        try:
            os.remove(os.path.join(directory, entry))
        except OSError:
            pass


def _process_exists(pid: int) -> bool:
    if os.name != "posix":
        return True  # no harmless existence probe (os.kill would terminate it): keep the file
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # it exists (another user's), or we cannot tell: keep its file
    return True
