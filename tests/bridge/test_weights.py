"""The weights' host copy off SageMaker (bridge/weights.py) against moto's S3: copied and checked,
reused on a second start, resumed after an interruption, refused when a file does not match the
manifest, one copy per host."""

from __future__ import annotations

import hashlib
import json
import logging
import threading

import boto3
import pytest
from moto import mock_aws

from bridge import weights
from bridge.weights import (
    COMPLETE_MARKER,
    MANIFEST_NAME,
    WeightsError,
    ensure_local_copy,
    local_dir,
)

BUCKET, PREFIX = "models", "voxtral/rev1/"
URI = f"s3://{BUCKET}/{PREFIX}"
FILES = {
    "params.json": b'{"dim": 3072}',
    "tekken.json": b"t" * 5000,
    "sub/consolidated.safetensors": bytes(range(256)) * 400,
}


def manifest_for(files: dict[str, bytes]) -> bytes:
    entries = [
        {"name": n, "size": len(b), "sha256": hashlib.sha256(b).hexdigest()}
        for n, b in sorted(files.items())
    ]
    return json.dumps(
        {
            "format": "voicectl/model-manifest/v1",
            "source": {"kind": "huggingface"},
            "files": entries,
            "total_size": sum(e["size"] for e in entries),
        }
    ).encode()


class CountingClient:
    """A boto3 S3 client that counts download_file calls per key and can fail once on a chosen
    key."""

    def __init__(self, client, fail_on: str | None = None):
        self._client, self.fail_on, self.downloads = client, fail_on, []
        self.exceptions = client.exceptions

    def get_object(self, **kwargs):
        return self._client.get_object(**kwargs)

    def download_file(self, bucket, key, filename, **kwargs):
        self.downloads.append(key.removeprefix(PREFIX))
        if self.fail_on and key.endswith(self.fail_on):
            self.fail_on = None
            with open(filename, "wb") as part:  # a partial file, then the "interruption"
                part.write(b"half")
            raise KeyboardInterrupt("interrupted")
        return self._client.download_file(bucket, key, filename, **kwargs)


@pytest.fixture
def s3():
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        for name, body in FILES.items():
            client.put_object(Bucket=BUCKET, Key=PREFIX + name, Body=body)
        client.put_object(Bucket=BUCKET, Key=PREFIX + MANIFEST_NAME, Body=manifest_for(FILES))
        yield client


def test_copies_checks_and_reuses_on_a_second_start(s3, tmp_path, caplog):
    caplog.set_level(logging.INFO, "bridge.weights")
    first = CountingClient(s3)
    target = ensure_local_copy(URI, tmp_path, first)
    assert target == local_dir(tmp_path, BUCKET, PREFIX) == tmp_path / "models" / "voxtral" / "rev1"
    assert {
        p.relative_to(target).as_posix(): p.read_bytes()
        for p in target.rglob("*")
        if p.is_file() and not p.name.startswith(".")
    } == FILES
    assert sorted(first.downloads) == sorted(FILES)
    assert (
        "copying s3://models/voxtral/rev1/" in caplog.text
        and "checked against the manifest" in caplog.text
    )
    # A second task on the same host (or a restart) downloads nothing, even with the objects gone
    # from S3.
    for name in FILES:
        s3.delete_object(Bucket=BUCKET, Key=PREFIX + name)
    second = CountingClient(s3)
    assert ensure_local_copy(URI, tmp_path, second) == target
    assert second.downloads == []
    assert "reusing the copy" in caplog.text


def test_resumes_after_an_interruption_keeping_verified_files(s3, tmp_path):
    interrupted = CountingClient(s3, fail_on="sub/consolidated.safetensors")
    with pytest.raises(KeyboardInterrupt):
        ensure_local_copy(URI, tmp_path, interrupted)
    target = local_dir(tmp_path, BUCKET, PREFIX)
    assert not (target / COMPLETE_MARKER).exists()
    assert (target / "params.json").read_bytes() == FILES[
        "params.json"
    ]  # verified before the interruption
    resumed = CountingClient(s3)
    ensure_local_copy(URI, tmp_path, resumed)
    # Manifest order: params.json (verified before the interruption, kept), then the rest.
    assert resumed.downloads == ["sub/consolidated.safetensors", "tekken.json"]
    assert (target / "sub/consolidated.safetensors").read_bytes() == FILES[
        "sub/consolidated.safetensors"
    ]
    assert not list(target.rglob("*.part"))


def test_refuses_a_file_that_does_not_match_the_manifest(s3, tmp_path):
    s3.put_object(
        Bucket=BUCKET, Key=PREFIX + "tekken.json", Body=b"x" * 5000
    )  # same size, other bytes
    with pytest.raises(WeightsError) as caught:
        ensure_local_copy(URI, tmp_path, s3)
    message = str(caught.value)
    assert message.startswith("tekken.json: refused, it does not match model-manifest.json")
    assert (
        hashlib.sha256(b"x" * 5000).hexdigest() in message
        and hashlib.sha256(FILES["tekken.json"]).hexdigest() in message
    )
    target = local_dir(tmp_path, BUCKET, PREFIX)
    assert not (target / "tekken.json").exists() and not (target / "tekken.json.part").exists()
    assert not (target / COMPLETE_MARKER).exists()


def test_a_changed_manifest_invalidates_the_copy(s3, tmp_path):
    ensure_local_copy(URI, tmp_path, s3)
    changed = {**FILES, "params.json": b'{"dim": 4096}'}
    s3.put_object(Bucket=BUCKET, Key=PREFIX + "params.json", Body=changed["params.json"])
    s3.put_object(Bucket=BUCKET, Key=PREFIX + MANIFEST_NAME, Body=manifest_for(changed))
    client = CountingClient(s3)
    target = ensure_local_copy(URI, tmp_path, client)
    assert client.downloads == ["params.json"]  # the one changed file (same size, other bytes)
    assert (target / "params.json").read_bytes() == changed["params.json"]


def test_missing_or_malformed_manifest_and_unsafe_names(s3, tmp_path):
    with pytest.raises(WeightsError, match="does not exist: the prefix is not staged"):
        ensure_local_copy(f"s3://{BUCKET}/other/", tmp_path, s3)
    s3.put_object(Bucket=BUCKET, Key=PREFIX + MANIFEST_NAME, Body=b'{"format": "v0", "files": []}')
    with pytest.raises(WeightsError, match="is not a model manifest: format is 'v0'"):
        ensure_local_copy(URI, tmp_path, s3)
    s3.put_object(Bucket=BUCKET, Key=PREFIX + MANIFEST_NAME, Body=manifest_for({"../escape": b"x"}))
    with pytest.raises(WeightsError, match=r"'../escape' is not a relative path"):
        ensure_local_copy(URI, tmp_path, s3)
    with pytest.raises(WeightsError, match="must be 's3://<bucket>/<prefix>/'"):
        ensure_local_copy("s3://models", tmp_path, s3)


def test_two_tasks_on_one_host_copy_once(s3, tmp_path, caplog):
    caplog.set_level(logging.INFO, "bridge.weights")
    client = CountingClient(s3)
    results, errors = [], []

    def start():
        try:
            results.append(ensure_local_copy(URI, tmp_path, client))
        except Exception as error:  # reported by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=start) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == [] and len(results) == 2 and results[0] == results[1]
    assert sorted(client.downloads) == sorted(FILES)  # each file once
    assert "reusing the copy" in caplog.text


def test_progress_is_logged(monkeypatch, s3, tmp_path, caplog):
    caplog.set_level(logging.INFO, "bridge.weights")
    monkeypatch.setattr(weights, "PROGRESS_EVERY_S", 0.0)
    ensure_local_copy(URI, tmp_path, s3)
    assert "GB (100 %)" in caplog.text


def test_entrypoint_starts_vllm_on_the_host_copy(monkeypatch, s3, tmp_path):
    from bridge import entrypoint

    started = {}

    async def fake_supervise(
        command, bridge_cmd, env, drain_s, bridge_env=None, bridge_pass_fds=()
    ):
        started["command"] = command
        return 0

    # moto's fake AWS credentials are in this process's environment: no re-exec of pytest
    # (env_secrets).
    monkeypatch.setattr(entrypoint.env_secrets, "reexec_without_secrets", lambda: None)
    monkeypatch.setattr(entrypoint.env_secrets, "make_undumpable", lambda: True)

    monkeypatch.setattr(boto3, "client", lambda *a, **k: s3)
    monkeypatch.setattr(entrypoint, "supervise", fake_supervise)
    monkeypatch.setenv("MODEL_S3_URI", URI)
    monkeypatch.setenv("MODEL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("SM_VLLM_MODEL", "/opt/ml/model")
    assert entrypoint.main() == 0
    command = started["command"]
    assert command[command.index("--model") + 1] == str(local_dir(tmp_path, BUCKET, PREFIX))
    # A prefix that does not match its manifest: exit 3 before vLLM starts.
    started.clear()
    s3.put_object(
        Bucket=BUCKET,
        Key=PREFIX + MANIFEST_NAME,
        Body=manifest_for({**FILES, "params.json": b"{}"}),
    )
    assert entrypoint.main() == 3 and started == {}
