"""quorum/secret_files.py: a secret file is the server's alone, and at least
16 characters; every refusal names the flag, the file and the fix. And
``serve`` refuses a bad --delegation-token-secret-file with exit 2 before it
starts anything."""

from __future__ import annotations

import os

import pytest

from quorum.secret_files import SecretFileError, read_secret_file

from .test_serve import serve

FLAG = "--delegation-token-secret-file"
SECRET = "a-delegation-token-secret-of-some-length"


def _file(tmp_path, text=SECRET + "\n", mode=0o600):
    path = tmp_path / "secret"
    path.write_text(text)
    path.chmod(mode)
    return str(path)


@pytest.mark.parametrize("mode", [0o600, 0o400, 0o440, 0o640])
def test_the_servers_own_file_is_read_without_its_newline(tmp_path, mode):
    assert read_secret_file(_file(tmp_path, mode=mode), FLAG) == SECRET


@pytest.mark.parametrize("mode", [0o644, 0o604, 0o660, 0o666, 0o601])
def test_a_file_others_can_read_or_change_is_refused(tmp_path, mode):
    path = _file(tmp_path, mode=mode)
    with pytest.raises(SecretFileError, match=rf"{FLAG} .*mode 0{mode:o}.*chmod 600"):
        read_secret_file(path, FLAG)


def test_short_missing_binary_and_directory_are_refused(tmp_path):
    with pytest.raises(SecretFileError, match="at least 16 characters"):
        read_secret_file(_file(tmp_path, "short\n"), FLAG)
    with pytest.raises(SecretFileError, match="No such file"):
        read_secret_file(str(tmp_path / "missing"), FLAG)
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe" * 20)
    binary.chmod(0o600)
    with pytest.raises(SecretFileError, match="not UTF-8"):
        read_secret_file(str(binary), FLAG)
    directory = tmp_path / "dir"
    directory.mkdir(mode=0o700)
    with pytest.raises(SecretFileError):
        read_secret_file(str(directory), FLAG)


def test_serve_refuses_a_world_readable_token_secret(tmp_path):
    path = _file(tmp_path, mode=0o644)
    r = serve(
        "--node-id", "0", "--voters", "0@127.0.0.1:1", FLAG, path,
        "--data-dir", str(tmp_path / "d"),
    )  # fmt: skip
    assert r.returncode == 2 and f"{FLAG} {path}: mode 0644" in r.stderr, r.stderr
    assert not os.path.exists(tmp_path / "d")
