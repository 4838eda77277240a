"""Secret files a voter is given by path (``serve --delegation-token-secret-file``):
read once, checked, never put on a command line.

A secret file must be the server's alone: no permission for others (the
``o`` bits) and not writable by its group. Kubernetes mounts Secrets with
``defaultMode: 0440`` and an ``fsGroup``, which passes; a file left 0644 by
an editor is refused with the command that fixes it. The value is the file's
text without surrounding whitespace (a trailing newline is not part of it),
at least 16 characters.

A voter's child processes (the orderer, the HTTP workers) are given the path,
never the value: their configuration travels on their command line, which
``ps`` shows to every user of the machine.
"""

from __future__ import annotations

import os
import stat

MIN_SECRET_LENGTH = 16


class SecretFileError(ValueError):
    """A secret file that cannot be used; the message names the flag and the file."""


def read_secret_file(path: str, flag: str) -> str:
    """The secret in ``path``, or SecretFileError saying what is wrong."""
    try:
        with open(path, encoding="utf-8") as f:
            mode = os.fstat(f.fileno()).st_mode
            text = f.read()
    except OSError as e:
        raise SecretFileError(f"{flag} {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise SecretFileError(f"{flag} {path}: the secret is not UTF-8 text") from None
    if not stat.S_ISREG(mode):
        raise SecretFileError(f"{flag} {path}: not a regular file")
    if mode & (stat.S_IRWXO | stat.S_IWGRP):
        raise SecretFileError(
            f"{flag} {path}: mode {stat.S_IMODE(mode):04o} lets other users read or change "
            f"the secret; make it the server's alone (chmod 600 {path})"
        )
    secret = text.strip()
    if len(secret) < MIN_SECRET_LENGTH:
        raise SecretFileError(
            f"{flag} {path}: the secret must be at least {MIN_SECRET_LENGTH} characters"
        )
    return secret
