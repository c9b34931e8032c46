"""Content-hash result cache in one SQLite file: safe for concurrent runs, JSON values only.

JSON rather than pickle: the cache directory lives in the linted project, and loading a pickle
from it would execute whatever a checked-in cache file says.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any, Iterable, Optional

DEFAULT_DIRNAME = ".ckptlint_cache"


class ResultCache:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._db: Optional[sqlite3.Connection] = None

    def _connect(self) -> Optional[sqlite3.Connection]:
        if self._db is None:
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
                (self.directory / ".gitignore").write_text("# created by ckptlint\n*\n")
                (self.directory / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
                self._db = sqlite3.connect(self.directory / "results.sqlite3", timeout=10)
                self._db.execute("CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            except (OSError, sqlite3.Error):
                # A read-only tree or a broken cache must never fail the lint: run uncached.
                self._db = None
        return self._db

    def get_many(self, keys: Iterable[str]) -> dict[str, Any]:
        db = self._connect()
        keys = list(keys)
        found: dict[str, Any] = {}
        if db is None:
            return found
        try:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for key, value in db.execute(f"SELECT key, value FROM results WHERE key IN ({marks})", chunk):
                    found[key] = json.loads(value)
        except (sqlite3.Error, ValueError):
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
            with db:
                db.executemany("INSERT OR REPLACE INTO results VALUES (?, ?)", list(items.items()))
        except sqlite3.Error:
            pass

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


def clean(directory: Path) -> bool:
    if directory.is_dir():
        shutil.rmtree(directory)
        return True
    return False
