"""Secrets out of the environment: read once, then gone from `/proc/<pid>/environ` before vLLM
starts.

A process's `/proc/<pid>/environ` shows the environment block the kernel placed at `execve` time;
`os.environ.pop` (libc `unsetenv`) changes the C `environ` array but not that block, so any process
of the same user (vLLM, and any code it loads) could still read a secret there. Two measures, both
at start-up and never on the relay path:

- Re-exec: a process started with a secret in its environment (`SECRET_VARIABLES`) writes the
  secrets into a pipe, then `execve`s itself, same PID and arguments, with an environment without
  them and `BRIDGE_SECRETS_FD` naming the pipe's read end; the new image reads the pipe once
  (:func:`take_secrets`) and closes it. The kernel's environment block of the process then holds no
  secret. The entrypoint hands the bridge its token the same way (a pipe passed with `pass_fds`), so
  the bridge's process is started without it.
- Not dumpable: `prctl(PR_SET_DUMPABLE, 0)` makes the kernel refuse `/proc/<pid>/environ`, `mem` and
  ptrace to any process lacking CAP_SYS_PTRACE, which Docker's default capability set (and so
  SageMaker's and ECS's) leaves out, even one of the same user (proc(5), "/proc/pid/environ";
  prctl(2), PR_SET_DUMPABLE; ptrace(2), "Ptrace access mode checking"). It also turns off core dumps
  of the bridge, which would hold the token.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from collections.abc import Mapping, MutableMapping

#: Variables holding a secret the container's processes read from their environment: the callers'
#: bearer token (ECS injects its Secrets Manager value; `auth`), and static AWS credentials, which
#: the entrypoint alone may use (the S3 copy of the weights, `weights`); on SageMaker and ECS the
#: role's credentials come from the container credentials endpoint instead, whose address
#: (`AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`) is kept out of vLLM's environment by the entrypoint's
#: allowlist.
SECRET_VARIABLES = (
    "BRIDGE_TOKEN",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
)
#: The variable naming the inherited pipe that carries the secrets (a file descriptor number).
SECRETS_FD_VARIABLE = "BRIDGE_SECRETS_FD"
#: Largest secrets payload read from the pipe, bytes (a Linux pipe holds 64 KiB; the secrets are far
#: smaller).
MAX_SECRETS_BYTES = 64 * 1024
#: prctl(2) option number (<linux/prctl.h> PR_SET_DUMPABLE).
_PR_SET_DUMPABLE = 4


class SecretsError(RuntimeError):
    """The inherited secrets pipe cannot be read (the message says which variable and why)."""


def secrets_in(env: Mapping[str, str]) -> dict[str, str]:
    """The `SECRET_VARIABLES` set in `env`, by name."""
    return {name: env[name] for name in SECRET_VARIABLES if name in env}


def without_secrets(env: Mapping[str, str]) -> dict[str, str]:
    """`env` without `SECRET_VARIABLES` and `SECRETS_FD_VARIABLE`."""
    return {
        name: value
        for name, value in env.items()
        if name not in SECRET_VARIABLES and name != SECRETS_FD_VARIABLE
    }


def secrets_pipe(secrets: Mapping[str, str]) -> int:
    """A pipe holding `secrets` as JSON, its write end closed; returns the read end (not
    inheritable)."""
    read_fd, write_fd = os.pipe()
    try:
        payload = json.dumps(dict(secrets)).encode()
        if len(payload) > MAX_SECRETS_BYTES:
            raise SecretsError(
                f"the secrets take {len(payload)} bytes, more than the {MAX_SECRETS_BYTES} a "
                "pipe holds"
            )
        os.write(write_fd, payload)  # below the pipe's capacity: never blocks
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    return read_fd


def reexec_without_secrets() -> None:
    """When this process's environment holds a secret, `execve` this same command without it (the
    secrets travel in a pipe named by `BRIDGE_SECRETS_FD`). Returns only when there is nothing to
    remove. Call first thing in `main`, before any thread or child process exists."""
    secrets = secrets_in(os.environ)
    if not secrets:
        return
    carried = take_secrets(os.environ) if SECRETS_FD_VARIABLE in os.environ else {}
    read_fd = secrets_pipe({**carried, **secrets})
    os.set_inheritable(read_fd, True)
    env = {**without_secrets(os.environ), SECRETS_FD_VARIABLE: str(read_fd)}
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, sys.orig_argv, env)


def take_secrets(env: MutableMapping[str, str]) -> dict[str, str]:
    """Read the secrets from the pipe `env[BRIDGE_SECRETS_FD]` names, once: the pipe is closed and
    the variable removed from `env`. Returns {} when the variable is not set.

    Raises:
        SecretsError: the variable is not a readable pipe's descriptor, or it does not hold a JSON
            object of strings.
    """
    raw = env.pop(SECRETS_FD_VARIABLE, None)
    if raw is None:
        return {}
    try:
        fd = int(raw)
    except ValueError:
        raise SecretsError(
            f"{SECRETS_FD_VARIABLE}={raw!r} is not a file descriptor number"
        ) from None
    try:
        with os.fdopen(fd, "rb", closefd=True) as pipe:
            payload = pipe.read(MAX_SECRETS_BYTES + 1)
    except OSError as error:
        raise SecretsError(
            f"{SECRETS_FD_VARIABLE}={raw}: cannot read the secrets pipe ({error.strerror})"
        ) from None
    try:
        secrets = json.loads(payload) if len(payload) <= MAX_SECRETS_BYTES else None
    except ValueError:
        secrets = None
    if not isinstance(secrets, dict) or not all(
        isinstance(value, str) for value in secrets.values()
    ):
        raise SecretsError(
            f"{SECRETS_FD_VARIABLE}={raw}: the pipe does not hold a JSON object of strings"
        )
    return {name: value for name, value in secrets.items() if name in SECRET_VARIABLES}


def make_undumpable() -> bool:
    """`prctl(PR_SET_DUMPABLE, 0)`: other processes without CAP_SYS_PTRACE can no longer read this
    one's memory or `/proc/<pid>/environ`. Returns False where it is not available (no Linux
    libc)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
