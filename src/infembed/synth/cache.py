"""The response cache: answers on disk in one SQLite file, keyed by :meth:`ChatRequest.key
<infembed.synth.chat.ChatRequest.key>`, committed one by one so that a killed run keeps every answer it got."""

from __future__ import annotations

import json
import sqlite3
import tempfile
import threading
import time
from pathlib import Path

from infembed.data.errors import DataError
from infembed.data.jsonl import ensure_dir
from infembed.synth.chat import ChatResponse


class ResponseCache:
    """Answers on disk, keyed by :meth:`ChatRequest.key`, in one SQLite file.

    WAL journal and one commit per answer: a process killed at any point leaves a valid database holding
    every answer committed before the kill. Safe to share between threads and processes.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            ensure_dir(self.path.parent)
            self._db = sqlite3.connect(
                str(self.path), timeout=60, check_same_thread=False, isolation_level=None
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, model TEXT, response TEXT, created REAL)"
            )
        except (OSError, sqlite3.Error) as error:  # an unwritable dir or file, not a database ...
            reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
            try:  # sqlite says "unable to open database file": the directory may say why
                with tempfile.TemporaryFile(dir=self.path.parent):
                    pass
            except OSError as why:
                reason = f"{why.strerror or why} in {self.path.parent}"
            raise DataError(
                f"cannot open the response cache ({reason})", self.path, hint="--cache puts it elsewhere"
            ) from None

    def get(self, key: str) -> ChatResponse | None:
        with self._lock:
            row = self._db.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        return ChatResponse.from_json(json.loads(row[0]), cached=True) if row else None

    def put(self, key: str, response: ChatResponse, model: str = "") -> None:
        text = json.dumps(response.to_json(), ensure_ascii=False)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO responses (key, model, response, created) VALUES (?, ?, ?, ?)",
                (key, model, text, time.time()),
            )

    def __contains__(self, key: str) -> bool:
        with self._lock:
            return self._db.execute("SELECT 1 FROM responses WHERE key = ?", (key,)).fetchone() is not None

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
