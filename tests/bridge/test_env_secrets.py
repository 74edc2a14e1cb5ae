"""services/bridge/env_secrets.py: secrets out of the environment through a pipe, read once (the
re-exec and the environment of the processes it starts, end to end: test_entrypoint.py and
test_main.py)."""

from __future__ import annotations

import os

import pytest

from bridge import env_secrets
from bridge.env_secrets import SecretsError, secrets_in, secrets_pipe, take_secrets, without_secrets

ENV = {
    "BRIDGE_TOKEN": "t0ken",
    "AWS_SECRET_ACCESS_KEY": "s",
    "PATH": "/bin",
    "BRIDGE_SECRETS_FD": "9",
}


def test_secrets_are_told_from_the_rest_of_the_environment():
    assert secrets_in(ENV) == {"BRIDGE_TOKEN": "t0ken", "AWS_SECRET_ACCESS_KEY": "s"}
    assert without_secrets(ENV) == {"PATH": "/bin"}


def test_the_pipe_is_read_once_and_only_known_secrets_are_taken():
    fd = secrets_pipe({"BRIDGE_TOKEN": "t0ken", "OTHER": "x"})
    assert not os.get_inheritable(fd)
    env = {"BRIDGE_SECRETS_FD": str(fd), "PATH": "/bin"}
    assert take_secrets(env) == {"BRIDGE_TOKEN": "t0ken"}
    assert env == {"PATH": "/bin"}  # the variable is gone
    with pytest.raises(OSError):
        os.fstat(fd)  # and the pipe closed
    assert take_secrets({}) == {}


@pytest.mark.parametrize(
    "content, message",
    [
        (b"[1]", "the pipe does not hold a JSON object of strings"),
        (b'{"BRIDGE_TOKEN": 1}', "the pipe does not hold a JSON object of strings"),
        (b"not json", "the pipe does not hold a JSON object of strings"),
    ],
)
def test_a_pipe_of_anything_else_is_refused(content, message):
    read_fd, write_fd = os.pipe()
    os.write(write_fd, content)
    os.close(write_fd)
    with pytest.raises(SecretsError, match=message):
        take_secrets({"BRIDGE_SECRETS_FD": str(read_fd)})


def test_a_variable_that_names_no_pipe_is_refused_with_its_value():
    with pytest.raises(
        SecretsError, match=r"BRIDGE_SECRETS_FD='x' is not a file descriptor number"
    ):
        take_secrets({"BRIDGE_SECRETS_FD": "x"})
    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    os.close(write_fd)
    with pytest.raises(
        SecretsError, match=rf"BRIDGE_SECRETS_FD={read_fd}: cannot read the secrets pipe"
    ):
        take_secrets({"BRIDGE_SECRETS_FD": str(read_fd)})


def test_secrets_too_large_for_a_pipe_are_refused_before_writing():
    with pytest.raises(SecretsError, match="more than the 65536 a pipe holds"):
        secrets_pipe({"BRIDGE_TOKEN": "x" * env_secrets.MAX_SECRETS_BYTES})


def test_nothing_to_remove_returns_without_re_exec(monkeypatch):
    monkeypatch.setattr(os, "environ", {"PATH": "/bin"})
    monkeypatch.setattr(os, "execve", lambda *args: pytest.fail("no re-exec without a secret"))
    assert env_secrets.reexec_without_secrets() is None
