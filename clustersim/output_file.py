"""Output files: checked before any work is done, then written atomically (a complete file or none).

One rule for every file clustersim writes (the trace, HTML pages, the sweep's table and plot, the
goodput JSON, an imported scenario, a calibrated profile):

* ``check_output_path`` refuses, with exit 2 naming the option, a path that cannot be written
  before the command spends its time: an empty path, a name longer than the file system allows,
  a directory, device, FIFO or broken link, a folder on the way that is a file, a folder that is
  not writable or where a temporary file cannot be created and removed (the check makes one:
  /proc, /sys, a read-only mount), and the file behind the command's own standard input, output
  or error (``--trace /dev/stdout > o.txt``). Missing folders are fine: the writer creates them.
  It also refuses a path that is one of the command's input files (``inputs``: the same file by
  path, link or hard link), which the rename would replace: ``calibrate --log x.log --out x.log``
  lost the user's log.
* ``atomic_write`` writes a temporary file in the target's folder (same file system), flushes and
  fsyncs it, gives it the mode a plain ``open`` would (0666 less the umask; mkstemp makes 0600),
  ``os.replace``s it over the target (atomic on POSIX and Windows; a symbolic link is followed, as
  ``open`` follows it, and the file it names is replaced) and fsyncs the folder so that the rename
  itself survives a crash (POSIX rename(2)). An interrupted write leaves the old file
  or none, never half of one.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

from clustersim.errors import InputError

NAME_MAX_BYTES = 255          # NAME_MAX of Linux and macOS file systems (ext4, xfs, APFS): one path component
_TMP_STEM_CHARS = 32          # the temporary file's name keeps this much of the target's, so it stays short


def check_output_path(path: str | os.PathLike[str], option: str, suffixes: Iterable[str] = (),
                      inputs: Iterable[str | os.PathLike[str]] = ()) -> Path:
    """The output path ``path`` of ``option``, or exit 2 if it cannot be written, or is one of the
    command's ``inputs`` (the files it reads: the rename would replace the user's file; see the module)."""
    text = os.fspath(path)
    if text == "":
        raise InputError(option, "", "a file name (an empty path names no file)")
    target = Path(text)
    wanted = tuple(suffixes)
    if wanted and target.suffix.lower() not in wanted:
        raise InputError(option, text, "a file name ending in " + " or ".join(wanted))
    if len(os.fsencode(target.name)) > NAME_MAX_BYTES:
        raise InputError(option, text, f"a file name of at most {NAME_MAX_BYTES} bytes (the file system's limit)")
    if target.exists() and not target.is_file() or target.is_symlink() and not target.exists():
        raise InputError(option, text, "a path to a regular file (this is a directory, a device, a FIFO or a broken "
                                       "link)")
    _check_not_a_stream(target, option, text)
    parent = _folder(target, option, text)
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(option, text, f"a path whose folders are folders ({parent} is a file)")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(option, text, "a path in a writable directory (or one that can be created)")
    _probe(parent, option, text)
    _check_not_an_input(target, option, text, inputs)
    return target


def _folder(target: Path, option: str, text: str) -> Path:
    """The folder ``atomic_write`` makes its temporary file in: the target's, links followed."""
    try:
        return target.resolve().parent
    except (OSError, RuntimeError):   # a loop of symbolic links on the way (RuntimeError before Python 3.13)
        raise InputError(option, text, "a path without a loop of symbolic links") from None


def _probe(folder: Path, option: str, text: str) -> None:
    """Create and remove a temporary file in ``folder``: a folder that lets nothing be created
    (/proc, /sys, a read-only mount) is refused now, not after the work."""
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".clustersim-probe.", suffix=".tmp")
    except OSError as exc:
        raise InputError(option, text, f"a path in a folder where files can be created ({folder}: "
                                       f"{exc.strerror or exc})") from None
    os.close(fd)
    os.unlink(tmp)


def _check_not_a_stream(target: Path, option: str, text: str) -> None:
    """Refuse the file behind the command's own standard input, output or error (``--trace
    /dev/stdout > o.txt``, ``--out o.txt > o.txt``): the rename would put a new file in its place
    while the stream went on into the old one."""
    if not target.exists():
        return
    mine = target.stat()
    for fd, name in ((0, "input"), (1, "output"), (2, "error")):
        try:
            st = os.fstat(fd)
        except OSError:   # the stream is closed
            continue
        if (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino):
            raise InputError(option, text, f"a file that is not this command's standard {name} (write to "
                                           "a file of its own, then read or copy that)")


def _check_not_an_input(target: Path, option: str, text: str, inputs: Iterable[str | os.PathLike[str]]) -> None:
    """Refuse an existing output that is the same file (path, link or hard link) as an input;
    '-' (standard input) and inputs that do not exist are not files to compare."""
    if not target.exists():
        return
    for given in inputs:
        if os.fspath(given) in ("", "-") or not Path(given).exists():
            continue
        if os.path.samefile(target, given):
            raise InputError(option, text, "a path that is not one of the command's input files "
                                           f"({os.fspath(given)} is read by this command)")


def atomic_write(path: str | os.PathLike[str], write: Callable[[IO[bytes]], None]) -> None:
    """Call ``write(f)`` on a temporary binary file beside ``path``, then move it into place."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target = target.resolve()   # a link is followed, as open() does: the file it names is replaced, the link kept
    folder = target.parent
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{target.name[:_TMP_STEM_CHARS]}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(folder)


# Figure metadata that differs between two identical runs (a date, the library's name and version),
# left out per format, and a fixed salt for the SVG element ids (matplotlib draws them at random):
# identical inputs give identical files.
_FIGURE_METADATA = {"png": {"Software": None}, "svg": {"Creator": None, "Date": None},
                    "pdf": {"Producer": None, "Creator": None, "CreationDate": None}}


def save_figure(fig: Any, path: str | os.PathLike[str], dpi: int = 120) -> None:
    """A matplotlib figure written atomically, its format from the suffix, without dates or ids
    that change between runs."""
    import matplotlib

    fmt = str(path).rsplit(".", 1)[-1].lower()
    with matplotlib.rc_context({"svg.hashsalt": "clustersim"}):
        atomic_write(path, lambda f: fig.savefig(f, format=fmt, dpi=dpi, metadata=_FIGURE_METADATA.get(fmt, {})))


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """``text`` as UTF-8, atomically."""
    data = text.encode("utf-8")
    atomic_write(path, lambda f: f.write(data))


def write_json_atomic(path: str | os.PathLike[str], data: Any) -> None:
    """``data`` as compact JSON, atomically."""
    text = json.dumps(data, separators=(",", ":"), sort_keys=False)
    write_text_atomic(path, text)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # Windows cannot open directories; os.replace is durable enough there
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
