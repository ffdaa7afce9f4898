"""Paths: the checks every command runs on the paths it is given before any work, and the model cache's
location. Torch-free."""
from __future__ import annotations

import os
import re
import stat
import tempfile

CACHE_ENV = "REASONLAB_CACHE"


NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


class PathError(ValueError):
    """A path the user gave that cannot be used (a file where a directory is needed, unwritable, not regular)."""


def regular_file(path: str, what: str = "file") -> str:
    """`path` if it is a regular file; PathError otherwise. A FIFO would block open() forever, a directory or a
    device would fail later with a less clear message."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise PathError(f"{what} {path} not found") from None
    except OSError as e:
        raise PathError(f"{what} {path} is unreadable: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise PathError(f"{what} {path} is not a regular file")
    return path


def writable_dir(path: str, what: str = "directory", create: bool = True) -> str:
    """Prove `path` writable by creating and removing a unique temp file in it, so a bad --cache-dir / --out / --json
    fails at once, not after minutes of work. create=False: a directory that does not exist yet is not made; its
    nearest existing parent is probed instead (a command refused after this check leaves nothing on disk)."""
    path = os.path.abspath(os.path.expanduser(path))
    try:
        if os.path.exists(path) and not os.path.isdir(path):
            raise PathError(f"{what} {path} is a file, not a directory")
        probe_in = path
        if create:
            os.makedirs(path, exist_ok=True)
        else:
            while not os.path.exists(probe_in):
                probe_in = os.path.dirname(probe_in)
            if not os.path.isdir(probe_in):
                raise PathError(f"{what} {path}: {probe_in} is a file, not a directory")
        fd, probe = tempfile.mkstemp(dir=probe_in, prefix=".tmp-probe-")
        os.close(fd)
        os.remove(probe)
    except PathError:
        raise
    except OSError as e:
        raise PathError(f"{what} {path} is not writable: {e.strerror or e}") from None
    return path


def writable_file(path: str, what: str = "file") -> str:
    """A file we may (atomically) write: not a directory, in a writable directory."""
    if os.path.isdir(path):
        raise PathError(f"{what} {path} is a directory, not a file")
    writable_dir(os.path.dirname(os.path.abspath(path)) or ".", f"{what}'s directory")
    return path


def cache_dir(path: str | None = None) -> str:
    """The model cache: `path`, else $REASONLAB_CACHE, else ~/.cache/reasonlab."""
    return os.path.abspath(os.path.expanduser(path or os.environ.get(CACHE_ENV) or "~/.cache/reasonlab"))


def check_name(name: str) -> str:
    """A cache name is letters, digits, '_', '.', '-' (no separators, no '..'): it cannot leave the cache."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name) or ".." in name:   # match()'s $ also matches before a final newline
        raise ValueError(f"invalid model name {name!r}: use letters, digits, '_', '.' and '-' only")
    return name


def resolve(path: str) -> str:
    """Accept a checkpoint given as stem, .json or .safetensors path."""
    for ext in (".json", ".safetensors"):
        if path.endswith(ext):
            return path[:-len(ext)]
    return path


def writable_config_home(app: str) -> bool:
    """Whether `app` (matplotlib) can keep its config and cache where it looks first: $MPLCONFIGDIR when set, else
    <$XDG_CONFIG_HOME or ~/.config>/<app>, made if missing (as the app itself would) and written to once."""
    if os.environ.get("MPLCONFIGDIR"):
        return True
    path = os.path.join(os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config"), app)
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            return True
    except OSError:
        return False
