"""Content-hash result cache in one SQLite file: safe for concurrent runs, JSON values only.

JSON rather than pickle: the cache directory lives in the linted project, and loading a pickle
from it would execute whatever a checked-in cache file says.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional

from ckptlint import __version__

DEFAULT_DIRNAME = ".ckptlint_cache"


TAG_NAME = "CACHEDIR.TAG"
TAG_SIGNATURE = "Signature: 8a477f597d28d172789f06886806bc55"  # the Cache Directory Tagging spec
_DATABASE = "results.sqlite3"
_SCHEMA = 2  # PRAGMA user_version: a database of another layout is emptied, not misread
_TAG = f"{TAG_SIGNATURE}\n# This file is a cache directory tag created by ckptlint ({_DATABASE}).\n# For information about cache directory tags, see https://bford.info/cachedir/\n"
_GITIGNORE_NAME = ".gitignore"
_GITIGNORE = "# created by ckptlint\n*\n"
# With the tag and the .gitignore, every file ckptlint writes in its cache folder: `clean`
# removes these and nothing else.
_DATABASE_FILES = (_DATABASE, f"{_DATABASE}-journal", f"{_DATABASE}-wal", f"{_DATABASE}-shm")


class CacheError(Exception):
    """A cache folder ckptlint must not touch, or could not clean; the message is user-facing."""


def is_tagged(directory: str) -> bool:
    """Whether `directory` holds a cache directory tag (any tool's): never linted."""
    try:
        with open(os.path.join(directory, TAG_NAME), "rb") as handle:
            return handle.read(len(TAG_SIGNATURE)) == TAG_SIGNATURE.encode()
    except OSError:
        return False


def _is_ours(directory: Path) -> bool:
    """Tagged, and by ckptlint: the tag names it, or (caches from before the tag did) the
    .gitignore is the one ckptlint writes."""
    try:
        tag = (directory / TAG_NAME).read_text(encoding="utf-8", errors="replace")
        if not tag.startswith(TAG_SIGNATURE):
            return False
        return "created by ckptlint" in tag or (directory / _GITIGNORE_NAME).read_text(encoding="utf-8", errors="replace") == _GITIGNORE
    except OSError:
        return False


def _create(directory: Path) -> None:
    """The folder appears with its tag already inside (renamed into place), so a concurrent run
    never sees it untagged; a run that loses the race uses the winner's."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent)
    try:
        Path(staging, _GITIGNORE_NAME).write_text(_GITIGNORE)
        Path(staging, TAG_NAME).write_text(_TAG)
        with contextlib.suppress(OSError):
            os.rename(staging, directory)  # fails if the folder exists meanwhile (not empty)
    finally:
        for name in (_GITIGNORE_NAME, TAG_NAME):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(staging, name))
        with contextlib.suppress(OSError):
            os.rmdir(staging)
    if not _is_ours(directory):
        raise CacheError(f"cannot create the cache directory {directory}")


def tool_identity() -> str:
    """This build of ckptlint: every commit installed from the repository is the same version, so
    the digest of the package's own source tells an older analysis's rows from this one's."""
    return f"{__version__}+{_own_source_digest()}"


@functools.cache
def _own_source_digest() -> str:
    return source_digest(Path(__file__).parent)


def source_digest(package: Path) -> str:
    digest = hashlib.blake2b(digest_size=8)
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _checksum(key: str, value: str) -> str:
    """Binds a row's value to its key (which names the content digest it describes) and to this
    ckptlint: an edited, truncated or foreign row fails it. Not a defence against someone who can
    write the project anyway; against corruption, stale layouts and hand edits."""
    digest = hashlib.blake2b(key.encode(), digest_size=16, key=f"ckptlint {tool_identity()}".encode()[:64])
    digest.update(b"\0")
    digest.update(value.encode())
    return digest.hexdigest()


def _is_corruption(error: sqlite3.Error) -> bool:
    """SQLITE_CORRUPT or SQLITE_NOTADB, not a lock or a read-only file."""
    code = getattr(error, "sqlite_errorcode", None)  # Python >= 3.11
    if code is None:
        return type(error) is sqlite3.DatabaseError
    return code & 0xFF in (11, 26)


class ResultCache:
    """Rows are JSON text with a checksum; a row that fails it, or the caller's schema check, is a miss."""

    def __init__(self, directory: Path, notify: Callable[[str], None] = lambda line: print(line, file=sys.stderr)) -> None:
        """Raises CacheError if `directory` exists and ckptlint did not create it."""
        self.directory = Path(os.path.abspath(directory))
        if self.directory.exists() and not _is_ours(self.directory):
            raise CacheError(
                f"cache directory {directory} already exists and was not created by ckptlint: refusing to write "
                "into it (name a folder that does not exist yet, or pass --no-cache)"
            )
        self._notify = notify
        self._db: Optional[sqlite3.Connection] = None
        self._unusable = False

    def _connect(self) -> Optional[sqlite3.Connection]:
        if self._db is None and not self._unusable:
            try:
                if not self.directory.exists():
                    _create(self.directory)
                self._db = self._open()
            except sqlite3.Error as error:
                if _is_corruption(error):
                    self._recreate(error)
                else:
                    self._unusable = True
            except (OSError, CacheError):
                # A read-only tree must never fail the lint: run uncached.
                self._unusable = True
        return self._db

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.directory / _DATABASE, timeout=10, isolation_level=None)
        try:
            if db.execute("PRAGMA user_version").fetchone()[0] != _SCHEMA:
                with _transaction(db):  # another run may be doing the same
                    if db.execute("PRAGMA user_version").fetchone()[0] != _SCHEMA:
                        db.execute("DROP TABLE IF EXISTS results")
                        db.execute("CREATE TABLE results (key TEXT PRIMARY KEY, value TEXT NOT NULL, checksum TEXT NOT NULL)")
                        db.execute(f"PRAGMA user_version = {_SCHEMA}")
        except sqlite3.Error:
            db.close()
            raise
        return db

    def _recreate(self, error: sqlite3.Error) -> None:
        self.close()
        path = self.directory / _DATABASE
        try:
            _remove(self.directory, _DATABASE_FILES)
            self._db = self._open()
        except (OSError, sqlite3.Error):
            self._unusable = True
            self._notify(f"ckptlint: warning: the result cache {path} is corrupt ({error}) and could not be recreated; running uncached")
            return
        self._notify(f"ckptlint: warning: the result cache {path} was corrupt ({error}); recreated it")

    def _failed(self, error: sqlite3.Error) -> None:
        """A cache error never fails the lint; a corrupt database is replaced once."""
        if _is_corruption(error) and self._db is not None:
            self._recreate(error)
        else:
            self.close()
            self._unusable = True

    def get_many(self, keys: Iterable[str], valid: Callable[[Any], bool] = lambda value: True) -> dict[str, Any]:
        """The intact rows of `keys` whose decoded value passes `valid`."""
        db = self._connect()
        keys = list(keys)
        found: dict[str, Any] = {}
        if db is None:
            return found
        try:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for key, value, checksum in db.execute(f"SELECT key, value, checksum FROM results WHERE key IN ({marks})", chunk):
                    if not (isinstance(value, str) and checksum == _checksum(key, value)):
                        continue
                    try:
                        data = json.loads(value)
                    except ValueError:
                        continue
                    if valid(data):
                        found[key] = data
        except sqlite3.Error as error:
            self._failed(error)
            return {}
        return found

    def put_many(self, items: dict[str, Any]) -> None:
        self.put_many_json({key: json.dumps(value) for key, value in items.items()})

    def put_many_json(self, items: dict[str, str]) -> None:
        """Values already serialised as JSON text."""
        db = self._connect()
        if db is None or not items:
            return
        try:
            with _transaction(db):
                db.executemany("INSERT OR REPLACE INTO results VALUES (?, ?, ?)", [(key, value, _checksum(key, value)) for key, value in items.items()])
        except sqlite3.Error as error:
            self._failed(error)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


@contextlib.contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def clean(directory: Path) -> str:
    """Remove ckptlint's files from its cache folder, and the folder if nothing else is in it.
    Returns what was done; raises CacheError for a folder ckptlint did not create."""
    if not os.path.lexists(directory):
        return f"no cache at {directory}"
    if not _is_ours(Path(directory)):
        raise CacheError(f"{directory} is not a ckptlint cache (no {TAG_NAME} written by ckptlint): not removing it")
    try:
        _remove(directory, _DATABASE_FILES)
        foreign = sorted(set(os.listdir(directory)) - {TAG_NAME, _GITIGNORE_NAME})
        if not foreign:
            _remove(directory, (_GITIGNORE_NAME, TAG_NAME))
            os.rmdir(directory)
    except OSError as error:
        raise CacheError(f"cannot remove {error.filename or directory}: {error.strerror or error}") from None
    if foreign:
        # The folder keeps its tag: it stays a ckptlint cache, never linted, and usable again.
        noun = "file" if len(foreign) == 1 else "files"
        return f"removed the cache in {directory}; kept {len(foreign)} {noun} ckptlint did not create"
    return f"removed {directory}"


def _remove(directory: Path, names: Iterable[str]) -> None:
    for name in names:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(directory, name))
