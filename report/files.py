"""The files the suite reads and writes: JSON it is given, files it leaves.

Reading: a baseline, a durations file, a report is JSON a user hands the
suite.  Python's parser recurses once a level of nesting, so a file of
``[[[[...]]]]`` 100000 deep raises RecursionError, which no reader expected
(pytest said INTERNALERROR).  :func:`read_json` says every way a file cannot
be read in one error, which its reader turns into a usage error naming it.

Writing: every file is written to a temporary name beside it and renamed into
place, so that a reader never sees half of one and a symbolic link planted
under its name is replaced, never followed.  The temporary file is created as
``open`` creates one, readable as the umask allows (0644 under umask 022):
``tempfile.mkstemp`` would give 0600, a report or baseline no one else (a CI
job's publisher, a colleague, a web server) could read.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

CREATED = 0o666  # the mode open() asks for; the umask takes its bits away


class UnreadableJSON(ValueError):
    """A file holds no JSON the suite can read; the message says why (its reader names the file)."""


def read_json(path: Path):
    """The JSON value in ``path`` (UTF-8).  FileNotFoundError where there is none (each reader says that in its own
    words); UnreadableJSON for any other reason: an OS error, bytes that are not UTF-8, no JSON, nesting too deep."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UnreadableJSON(str(error)) from None
    except RecursionError:
        raise UnreadableJSON("nested too deeply for Python's JSON parser") from None


def replace_file(path: Path, write) -> Path:
    """Write ``path`` atomically: ``write(temporary_path)`` fills a new file beside it, renamed over it."""
    temporary = created_beside(path)
    try:
        write(temporary)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path


def write_text(path: Path, text: str) -> Path:
    return replace_file(path, lambda temporary: temporary.write_text(text, encoding="utf-8"))


def created_beside(path: Path) -> Path:
    """A new empty file in ``path``'s folder, under a name no file had (``O_EXCL``: never a planted link's), with
    the mode the umask allows."""
    while True:
        temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}{path.suffix}")
        try:
            os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, CREATED))
            return temporary
        except FileExistsError:  # another file took the name first: draw another
            pass
