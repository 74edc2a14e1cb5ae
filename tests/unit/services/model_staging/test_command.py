"""stage-model end to end against moto's S3 through the real transfer code (no model hub)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
from collections import Counter

import pytest
from botocore.exceptions import EndpointConnectionError

from contracts.weights import MANIFEST_NAME
from model_staging.stage_model import command as stage_model
from tests.unit.services.model_staging.conftest import (
    BUCKET,
    MIB,
    PART_SIZE_MIB,
    SHARD_1,
    SHARD_2,
)
from voicectl import cli

PREFIX = "models/voxtral"
URI = f"s3://{BUCKET}/{PREFIX}/"
MODEL_FILES = sorted(
    ["params.json", "tekken.json", SHARD_1, SHARD_2, "consolidated.safetensors.index.json"]
)
#: S3 operations that send file bytes.
SENDING_OPERATIONS = ("PutObject", "UploadPart", "CreateMultipartUpload")


def stage(session, model_dir, *extra: str) -> int:
    """Run stage-model --from-dir model_dir --s3-uri URI with the tests' part size, on
    ``session``."""
    parser = stage_model.argparse.ArgumentParser()
    stage_model.add_arguments(parser)
    args = parser.parse_args(
        [
            "--s3-uri",
            URI,
            "--from-dir",
            str(model_dir),
            "--part-size-mib",
            str(PART_SIZE_MIB),
            *extra,
        ]
    )
    return stage_model.run(args, session=session)


def count_calls(session) -> Counter:
    """Count S3 API calls made by clients of ``session`` from now on, by operation name."""
    calls: Counter = Counter()

    def record(model, **kwargs):
        calls[model.name] += 1

    session.events.register("before-call.s3", record)
    return calls


def keys_under_prefix(s3) -> list[str]:
    return sorted(
        o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{PREFIX}/").get("Contents", [])
    )


def body(s3, name: str) -> bytes:
    return s3.get_object(Bucket=BUCKET, Key=f"{PREFIX}/{name}")["Body"].read()


def test_stages_allow_listed_files_with_a_manifest_of_their_checksums(aws, s3, model_dir, capsys):
    assert stage(aws, model_dir, "--revision", "b" * 40) == 0

    assert keys_under_prefix(s3) == sorted(
        f"{PREFIX}/{name}" for name in [*MODEL_FILES, MANIFEST_NAME]
    )
    for name in MODEL_FILES:
        assert body(s3, name) == (model_dir / name).read_bytes(), name
    manifest = json.loads(body(s3, MANIFEST_NAME))
    assert manifest["source"] == {
        "kind": "local-directory",
        "path": str(model_dir.resolve()),
        "repository": "mistralai/Voxtral-Mini-4B-Realtime-2602",
        "revision": "b" * 40,
    }
    assert [entry["name"] for entry in manifest["files"]] == MODEL_FILES
    for entry in manifest["files"]:
        data = (model_dir / entry["name"]).read_bytes()
        assert entry["sha256"] == hashlib.sha256(data).hexdigest()
        assert entry["size"] == len(data)
    assert manifest["total_size"] == sum(len((model_dir / n).read_bytes()) for n in MODEL_FILES)
    # The 12 MiB shard went up in parts with per-part SHA-256 checksums (composite checksum
    # "...-3").
    head = s3.head_object(Bucket=BUCKET, Key=f"{PREFIX}/{SHARD_1}", ChecksumMode="ENABLED")
    assert head["ETag"].endswith('-3"')
    assert (
        head["Metadata"]["sha256"] == hashlib.sha256((model_dir / SHARD_1).read_bytes()).hexdigest()
    )
    out = capsys.readouterr().out
    assert f"this run sent {manifest['total_size']} bytes" in out


def test_second_run_uploads_nothing(aws, s3, model_dir, capsys):
    assert stage(aws, model_dir) == 0
    capsys.readouterr()
    calls = count_calls(aws)

    assert stage(aws, model_dir) == 0

    assert "this run sent 0 bytes" in capsys.readouterr().out
    assert [op for op in SENDING_OPERATIONS if calls[op]] == []
    assert calls["HeadObject"] >= len(MODEL_FILES)  # it did look


def test_changed_file_is_the_only_one_uploaded_again(aws, s3, model_dir, capsys):
    assert stage(aws, model_dir) == 0
    (model_dir / "params.json").write_text(
        json.dumps({"dim": 3072, "n_layers": 27}), encoding="utf-8"
    )
    capsys.readouterr()

    assert stage(aws, model_dir) == 0

    size = (model_dir / "params.json").stat().st_size
    assert f"this run sent {size} bytes" in capsys.readouterr().out
    assert body(s3, "params.json") == (model_dir / "params.json").read_bytes()
    manifest = json.loads(body(s3, MANIFEST_NAME))
    entry = next(e for e in manifest["files"] if e["name"] == "params.json")
    assert entry["sha256"] == hashlib.sha256((model_dir / "params.json").read_bytes()).hexdigest()


def test_run_stopped_mid_multipart_upload_resumes_and_completes(aws, s3, model_dir, capsys):
    """The network goes away after the first part of the 12 MiB shard: UploadPart and the
    AbortMultipartUpload that s3transfer tries on failure both fail, as they would with a lost
    connection or a killed process. The rerun sends only the two missing parts (7 MiB) and completes
    the same multipart upload."""
    parts_sent = Counter()

    def network_lost_after_first_part(model, **kwargs):
        parts_sent[model.name] += 1
        if model.name == "AbortMultipartUpload" or parts_sent["UploadPart"] > 1:
            raise EndpointConnectionError(endpoint_url=f"https://{BUCKET}.s3.amazonaws.com")

    aws.events.register("before-call.s3.UploadPart", network_lost_after_first_part)
    aws.events.register("before-call.s3.AbortMultipartUpload", network_lost_after_first_part)
    assert stage(aws, model_dir, "--max-concurrency", "1") == 1
    err = capsys.readouterr().err
    assert "Run the same command again to resume" in err

    unfinished = s3.list_multipart_uploads(Bucket=BUCKET, Prefix=f"{PREFIX}/")["Uploads"]
    assert [upload["Key"] for upload in unfinished] == [f"{PREFIX}/{SHARD_1}"]
    upload_id = unfinished[0]["UploadId"]
    assert [
        p["PartNumber"]
        for p in s3.list_parts(Bucket=BUCKET, Key=f"{PREFIX}/{SHARD_1}", UploadId=upload_id)[
            "Parts"
        ]
    ] == [1]
    assert f"{PREFIX}/{MANIFEST_NAME}" not in keys_under_prefix(
        s3
    )  # a partial prefix is not called complete
    assert f"{PREFIX}/{SHARD_1}" not in keys_under_prefix(s3)

    aws.events.unregister("before-call.s3.UploadPart", network_lost_after_first_part)
    aws.events.unregister("before-call.s3.AbortMultipartUpload", network_lost_after_first_part)
    calls = count_calls(aws)
    assert stage(aws, model_dir) == 0

    out = capsys.readouterr().out
    assert f"this run sent {7 * MIB} bytes" in out
    assert f"resumed 1 reusing {5 * MIB} bytes" in out
    assert calls["UploadPart"] == 2 and calls["CreateMultipartUpload"] == 0
    assert body(s3, SHARD_1) == (model_dir / SHARD_1).read_bytes()
    assert s3.list_multipart_uploads(Bucket=BUCKET, Prefix=f"{PREFIX}/").get("Uploads", []) == []
    assert json.loads(body(s3, MANIFEST_NAME))["total_size"] > 15 * MIB


def test_ctrl_c_mid_multipart_upload_keeps_the_upload_and_the_rerun_resumes(
    aws, s3, model_dir, capsys, monkeypatch
):
    """A real SIGINT arrives while the second part of the 12 MiB shard is being sent. s3transfer
    cancels its transfers on KeyboardInterrupt and would abort the multipart upload on its way out;
    the parts already sent must stay for the rerun, which sends only the rest and completes the same
    upload."""
    import threading

    from s3transfer.manager import TransferCoordinatorController

    previous_handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    parts = Counter()
    cancelled, held = threading.Event(), []
    cancel_every_transfer = TransferCoordinatorController.cancel

    def cancel_and_tell(
        self, *args, **kwargs
    ):  # the transfer manager's exit on the KeyboardInterrupt
        cancel_every_transfer(self, *args, **kwargs)
        cancelled.set()

    monkeypatch.setattr(TransferCoordinatorController, "cancel", cancel_and_tell)

    def ctrl_c_during_second_part(model, **kwargs):
        parts["UploadPart"] += 1
        if parts["UploadPart"] == 2:
            os.kill(os.getpid(), signal.SIGINT)
            # This part is in flight until the main thread took the KeyboardInterrupt and s3transfer
            # cancelled every transfer (the wait is a liveness bound).
            held.append(cancelled.wait(60))

    aws.events.register("before-call.s3.UploadPart", ctrl_c_during_second_part)
    try:
        try:
            code = stage(aws, model_dir, "--max-concurrency", "1")
        except (
            KeyboardInterrupt
        ):  # caught here so that a regression fails this test, not the whole session
            code = "KeyboardInterrupt escaped"
    finally:
        signal.signal(signal.SIGINT, previous_handler)
        aws.events.unregister("before-call.s3.UploadPart", ctrl_c_during_second_part)
    assert parts["UploadPart"] >= 2  # the interrupt did come in the middle of the multipart upload
    assert held == [True]  # and was taken while the second part was in flight
    key = f"{PREFIX}/{SHARD_1}"
    unfinished_uploads = s3.list_multipart_uploads(Bucket=BUCKET, Prefix=key).get("Uploads", [])
    assert [upload["Key"] for upload in unfinished_uploads] == [key]  # not aborted
    assert code == 130
    assert "interrupted; run the same command again to resume" in capsys.readouterr().err

    (unfinished,) = unfinished_uploads
    kept = [
        p["PartNumber"]
        for p in s3.list_parts(Bucket=BUCKET, Key=key, UploadId=unfinished["UploadId"]).get(
            "Parts", []
        )
    ]
    assert kept[0] == 1 and set(kept) <= {1, 2}
    assert f"{PREFIX}/{MANIFEST_NAME}" not in keys_under_prefix(s3)

    calls = count_calls(aws)
    assert stage(aws, model_dir) == 0

    out = capsys.readouterr().out
    reused = 5 * MIB * len(kept)
    assert f"resumed 1 reusing {reused} bytes" in out
    assert calls["CreateMultipartUpload"] == 0 and calls["UploadPart"] == 3 - len(kept)
    assert body(s3, SHARD_1) == (model_dir / SHARD_1).read_bytes()
    assert s3.list_multipart_uploads(Bucket=BUCKET, Prefix=f"{PREFIX}/").get("Uploads", []) == []


def test_unfinished_upload_of_other_bytes_is_aborted_and_replaced(aws, s3, model_dir, capsys):
    key = f"{PREFIX}/{SHARD_1}"
    stale = s3.create_multipart_upload(
        Bucket=BUCKET, Key=key, ChecksumAlgorithm="SHA256", Metadata={"sha256": "0" * 64}
    )
    s3.upload_part(
        Bucket=BUCKET,
        Key=key,
        UploadId=stale["UploadId"],
        PartNumber=1,
        Body=b"x" * (5 * MIB),
        ChecksumAlgorithm="SHA256",
    )

    assert stage(aws, model_dir) == 0

    assert body(s3, SHARD_1) == (model_dir / SHARD_1).read_bytes()
    assert s3.list_multipart_uploads(Bucket=BUCKET, Prefix=f"{PREFIX}/").get("Uploads", []) == []
    assert "resumed 0" in capsys.readouterr().out


def test_missing_local_shard_fails_before_uploading_and_names_it(aws, s3, model_dir, capsys):
    (model_dir / SHARD_2).unlink()

    assert stage(aws, model_dir) == 1

    assert f"missing {SHARD_2}" in capsys.readouterr().err
    assert keys_under_prefix(s3) == []


def test_missing_shard_in_s3_fails_verification_naming_the_file(aws, s3, model_dir, capsys):
    assert stage(aws, model_dir) == 0
    assert stage(aws, model_dir, "--verify-only") == 0
    assert "complete, 5 files" in capsys.readouterr().out
    s3.delete_object(Bucket=BUCKET, Key=f"{PREFIX}/{SHARD_2}")

    assert stage(aws, model_dir, "--verify-only") == 1

    err = capsys.readouterr().err
    assert (
        f"{SHARD_2}: missing (expected {3 * MIB} bytes at s3://{BUCKET}/{PREFIX}/{SHARD_2})" in err
    )
    assert SHARD_1 not in err


def test_verify_only_refuses_a_prefix_without_manifest(aws, s3, model_dir, capsys):
    s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}/params.json", Body=b"{}")

    assert stage(aws, model_dir, "--verify-only") == 1

    assert (
        f"{MANIFEST_NAME}: missing, so the prefix was never completely staged"
        in capsys.readouterr().err
    )


def test_object_outside_the_model_blocks_staging_unless_deleted(aws, s3, model_dir, capsys):
    stale_key = f"{PREFIX}/consolidated-old.safetensors"
    s3.put_object(Bucket=BUCKET, Key=stale_key, Body=b"old weights")

    assert stage(aws, model_dir) == 1
    assert "consolidated-old.safetensors: not part of the model" in capsys.readouterr().err
    assert f"{PREFIX}/params.json" not in keys_under_prefix(s3)

    assert stage(aws, model_dir, "--delete-extra", "--yes") == 0
    assert stale_key not in keys_under_prefix(s3)
    assert f"{PREFIX}/{MANIFEST_NAME}" in keys_under_prefix(s3)


def test_delete_extra_lists_what_it_would_delete_and_needs_yes(aws, s3, model_dir, capsys):
    stale_key = f"{PREFIX}/consolidated-old.safetensors"
    s3.put_object(Bucket=BUCKET, Key=stale_key, Body=b"old weights")

    assert stage(aws, model_dir, "--delete-extra") == 1

    err = capsys.readouterr().err
    assert f"would delete 1 object(s) not part of the model: {stale_key}" in err
    assert "--yes" in err
    assert stale_key in keys_under_prefix(s3)
    assert f"{PREFIX}/params.json" not in keys_under_prefix(s3)  # nothing staged either


def test_delete_extra_never_touches_sub_directories_or_unknown_files(aws, s3, model_dir, capsys):
    """Only model files directly in the prefix are deleted; anything else stops the run, named,
    deleting nothing."""
    kept = [
        f"{PREFIX}/important/data.csv",
        f"{PREFIX}/other-model/consolidated.safetensors",
        f"{PREFIX}/notes.txt",
    ]
    stale_key = f"{PREFIX}/consolidated-old.safetensors"
    for key in [*kept, stale_key]:
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"keep me")

    assert stage(aws, model_dir, "--delete-extra", "--yes") == 1

    err = capsys.readouterr().err
    assert "important/data.csv: in a sub-directory of the prefix" in err
    assert "other-model/consolidated.safetensors: in a sub-directory of the prefix" in err
    assert "notes.txt: not a model file" in err
    assert keys_under_prefix(s3) == sorted([*kept, stale_key])


def test_delete_extra_removes_files_of_the_previous_manifest(aws, s3, model_dir, capsys):
    """A file the previous manifest of this prefix listed is a model file of an earlier staging,
    whatever its name."""
    from constructs_lib.facts import S3Prefix
    from model_staging.stage_model.files import LocalFile
    from model_staging.stage_model.manifest import (
        Source,
        build_manifest,
        write_manifest,
    )

    old_key = f"{PREFIX}/tokenizer.model.v3"
    s3.put_object(Bucket=BUCKET, Key=old_key, Body=b"old tokenizer")
    previous = build_manifest(
        Source("local-directory", "example/old", None),
        [LocalFile("tokenizer.model.v3", model_dir, 13, "0" * 64)],
    )
    write_manifest(s3, S3Prefix.parse(URI), previous)

    assert stage(aws, model_dir, "--delete-extra", "--yes") == 0

    assert old_key not in keys_under_prefix(s3)
    assert f"deleting 1 object(s) not part of the model: {old_key}" in capsys.readouterr().err


def test_s3_uri_of_a_whole_bucket_is_refused_before_anything_happens(aws, s3, model_dir, capsys):
    s3.put_object(Bucket=BUCKET, Key="important/data.csv", Body=b"keep me")

    assert (
        stage_model.main(
            ["--s3-uri", f"s3://{BUCKET}", "--from-dir", str(model_dir), "--delete-extra", "--yes"]
        )
        == 2
    )

    assert f"'s3://{BUCKET}' names no prefix" in capsys.readouterr().err
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]] == [
        "important/data.csv"
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--s3-uri", URI, "--revision", "main"],
            "revision 'main' is not a full 40-character commit hash",
        ),
        (["--s3-uri", URI], "--revision is required"),
        (
            ["--s3-uri", "https://example.com/x", "--revision", "a" * 40],
            "expected an S3 URI like s3://",
        ),
        (["--revision", "a" * 40], "say where to stage"),
        (
            ["--s3-uri", URI, "--revision", "a" * 40, "--part-size-mib", "4"],
            "part size must be at least 5242880",
        ),
    ],
)
def test_bad_input_is_rejected_with_a_clear_message_before_any_download(aws, argv, message, capsys):
    assert stage_model.main(argv) == 2
    assert message in capsys.readouterr().err


def test_destination_and_revision_come_from_the_stack_outputs(aws, s3, model_dir, capsys):
    template = {
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {
            "ModelS3Uri": {"Value": URI},
            "ModelRepositoryId": {"Value": "example/model"},
            "ModelRevision": {"Value": "c" * 40},
        },
    }
    aws.client("cloudformation").create_stack(
        StackName="VoiceVoxtral", TemplateBody=json.dumps(template)
    )
    parser = stage_model.argparse.ArgumentParser()
    stage_model.add_arguments(parser)
    args = parser.parse_args(
        ["--stack", "VoiceVoxtral", "--from-dir", str(model_dir), "--part-size-mib", "5"]
    )

    assert stage_model.run(args, session=aws) == 0

    source = json.loads(body(s3, MANIFEST_NAME))["source"]
    assert (source["repository"], source["revision"]) == ("example/model", "c" * 40)


def test_staging_heads_only_keys_the_listing_shows(
    aws, s3, model_dir, capsys, head_needs_list_permission
):
    """With the build role's permissions a HeadObject of a missing key is a 403, not a 404: a first
    run into an empty prefix, a rerun and --verify-only must find missing keys by listing the
    prefix, never by HEAD."""
    assert stage(aws, model_dir) == 0, capsys.readouterr().err
    assert stage(aws, model_dir) == 0, capsys.readouterr().err
    s3.delete_object(Bucket=BUCKET, Key=f"{PREFIX}/{SHARD_2}")

    assert stage(aws, model_dir, "--verify-only") == 1

    assert f"{SHARD_2}: missing (expected {3 * MIB} bytes" in capsys.readouterr().err
    assert head_needs_list_permission == []


def test_verify_only_of_an_empty_prefix_lists_instead_of_heading(
    aws, s3, model_dir, capsys, head_needs_list_permission
):
    assert stage(aws, model_dir, "--verify-only") == 1

    assert (
        f"{MANIFEST_NAME}: missing, so the prefix was never completely staged"
        in capsys.readouterr().err
    )
    assert head_needs_list_permission == []


TOKEN = (
    "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"
)  # the shape of a Hub user access token (not a real one)


def voicectl_parse(monkeypatch, argv):
    monkeypatch.setattr(cli, "SUBCOMMAND_MODULES", ("voicectl.operations.stage_model",))
    return cli.build_parser().parse_args(["stage-model", *argv])


@pytest.mark.parametrize("option", ["--hf-token", "--hf-token=", "--token"])
def test_a_token_on_the_command_line_is_refused_without_echoing_it(monkeypatch, capsys, option):
    """argparse abbreviations made --hf-token mean --hf-token-secret-id, sending the token as a
    SecretId."""
    argv = [
        "--s3-uri",
        URI,
        "--revision",
        "a" * 40,
        *([option + TOKEN] if option.endswith("=") else [option, TOKEN]),
    ]
    for parse in (lambda: voicectl_parse(monkeypatch, argv), lambda: stage_model.main(argv)):
        with pytest.raises(SystemExit) as exit_:
            parse()
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert "not accepted on the command line" in err and "HF_TOKEN" in err
        assert TOKEN not in err


@pytest.mark.parametrize("abbreviation", ["--hf-token-s", "--s3", "--from", "--verify"])
def test_options_cannot_be_abbreviated(monkeypatch, capsys, abbreviation):
    argv = ["--revision", "a" * 40, abbreviation, "x"]
    for parse in (lambda: voicectl_parse(monkeypatch, argv), lambda: stage_model.main(argv)):
        with pytest.raises(SystemExit):
            parse()
        assert f"unrecognized arguments: {abbreviation}" in capsys.readouterr().err


def test_a_token_given_as_the_secret_id_is_refused_before_any_aws_call(aws, model_dir, capsys):
    calls = []
    aws.events.register("before-call", lambda model, **kwargs: calls.append(model.name))

    with pytest.raises(stage_model.UsageError) as error:
        stage(aws, model_dir, "--hf-token-secret-id", TOKEN)

    assert "looks like a Hub access token" in str(error.value) and "HF_TOKEN" in str(error.value)
    assert TOKEN not in str(error.value)
    assert calls == []
    assert (
        stage_model.main(["--s3-uri", URI, "--revision", "a" * 40, "--hf-token-secret-id", TOKEN])
        == 2
    )
    assert TOKEN not in capsys.readouterr().err


def test_a_secret_named_like_hf_token_is_still_a_secret_id():
    parser = stage_model.argparse.ArgumentParser()
    stage_model.add_arguments(parser)
    args = parser.parse_args(["--s3-uri", URI, "--hf-token-secret-id", "hf_token"])
    assert stage_model.check_secret_id(args.hf_token_secret_id) == "hf_token"


@pytest.mark.parametrize("revision", ["main", "v1.0", "0123abc"])
def test_a_local_copy_is_staged_only_under_a_pinned_revision(aws, s3, model_dir, revision):
    """The manifest would record "@ main" for whatever the copy holds: the same rule as for a
    download."""
    with pytest.raises(
        stage_model.UsageError,
        match=f"revision '{revision}' is not a full 40-character commit hash",
    ):
        stage(aws, model_dir, "--revision", revision)
    assert keys_under_prefix(s3) == []


RESUME_HINT = "Run the same command again to resume"


def test_a_missing_bucket_is_reported_without_the_resume_hint(aws, s3, model_dir, capsys):
    parser = stage_model.argparse.ArgumentParser()
    stage_model.add_arguments(parser)
    args = parser.parse_args(
        ["--s3-uri", "s3://no-such-bucket-here/models/voxtral/", "--from-dir", str(model_dir)]
    )

    assert stage_model.run(args, session=aws) == 1

    err = capsys.readouterr().err
    assert "NoSuchBucket" in err
    assert RESUME_HINT not in err


def test_a_missing_secret_is_reported_without_the_resume_hint(aws, s3, capsys, monkeypatch):
    from model_staging.stage_model import hub

    monkeypatch.setattr(
        hub, "download", lambda *a, **k: pytest.fail("must not download without the token")
    )
    argv = ["--s3-uri", URI, "--revision", "a" * 40, "--hf-token-secret-id", "no-such-secret"]
    parser = stage_model.argparse.ArgumentParser()
    stage_model.add_arguments(parser)

    assert stage_model.run(parser.parse_args(argv), session=aws) == 1

    err = capsys.readouterr().err
    assert "ResourceNotFoundException" in err
    assert RESUME_HINT not in err


@pytest.mark.parametrize(
    ("code", "status", "hint"),
    [
        ("SlowDown", 503, RESUME_HINT),
        ("InternalError", 500, RESUME_HINT),
        (
            "ExpiredToken",
            400,
            "Renew your AWS credentials, then run the same command again to resume",
        ),
    ],
)
def test_errors_a_rerun_can_fix_get_the_resume_hint(aws, s3, model_dir, capsys, code, status, hint):
    from botocore.exceptions import ClientError

    def fail(model, **kwargs):
        raise ClientError(
            {
                "Error": {"Code": code, "Message": code},
                "ResponseMetadata": {"HTTPStatusCode": status},
            },
            model.name,
        )

    aws.events.register("before-call.s3.PutObject", fail)
    try:
        assert stage(aws, model_dir) == 1
    finally:
        aws.events.unregister("before-call.s3.PutObject", fail)

    assert hint in capsys.readouterr().err
