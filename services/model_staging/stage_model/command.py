"""The staging command: put the model's weights under an S3 prefix, pinned, verified and resumable.

``voicectl stage-model`` (voicectl/stage_model.py registers these options) and the ModelStaging
build (``python -m stage_model``) both run :func:`run`.

Source: the Hugging Face Hub at a pinned commit (default repository
``mistralai/Voxtral-Mini-4B-Realtime-2602``), or a local copy (``--from-dir``). Destination:
``--s3-uri``, or the ``ModelS3Uri`` output of ``--stack`` (which also supplies the repository id and
revision when they are not given). Steps:

1. select the files vLLM needs (allow-list in :mod:`.constants`), hash them, and when downloaded,
   check sizes and checksums against the Hub;
2. remove the manifest if it will change (the prefix is "not complete" while it changes);
3. upload with boto3's managed transfer, skipping identical objects and resuming unfinished
   multipart uploads;
4. verify every file in S3 (size and SHA-256) and that nothing else is under the prefix;
5. write the manifest.

Exit codes: 0 staged and verified, 1 staging or verification failed, 2 bad input, 130 interrupted
(Ctrl-C).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from contracts.model import DEFAULT_REPO_ID, S3Prefix
from contracts.weights import MANIFEST_NAME

from .constants import (
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_PART_SIZE,
    MIB,
    MODEL_FILE_PATTERNS,
    OUTPUT_MODEL_REPOSITORY_ID,
    OUTPUT_MODEL_REVISION,
    OUTPUT_MODEL_S3_URI,
)

#: What the options' --help says about the command.
DESCRIPTION = (
    "Stage the model weights from the Hugging Face Hub (or a local copy) to an S3 prefix: pinned "
    "to a commit, verified file by file against the Hub and in S3, resumable, with a manifest "
    "written last. Every argument is checked before anything is downloaded or sent to AWS."
)


class UsageError(Exception):
    """Bad input: the message names what was wrong and what is allowed. Exit code 2."""


#: Exit code after Ctrl-C (128 + SIGINT, the shell convention).
EXIT_INTERRUPTED = 130

#: botocore retry policy for long transfers: "standard" mode retries throttling and transient
#: network errors (https://docs.aws.amazon.com/sdkref/latest/guide/feature-retry-behavior.html); 10
#: attempts ride out short outages.
RETRY_CONFIG = {"mode": "standard", "max_attempts": 10}


#: A Hugging Face user access token: "hf_" and (today) 34 letters; 30 or more letters or digits
#: after "hf_" is treated as a token, so that a secret named e.g. "hf_token" is still accepted as a
#: secret id.
HUB_TOKEN_RE = re.compile(r"hf_[A-Za-z0-9]{30,}")
#: Where the token goes instead of the command line (said by every refusal).
TOKEN_SOURCES = (
    "export HF_TOKEN, run `hf auth login`, or store it in Secrets Manager and pass "
    "--hf-token-secret-id"
)


class _RefuseToken(argparse.Action):
    """An option that exists only to refuse a token typed on the command line, without echoing it.

    Without it, ``--hf-token <token>`` is "unrecognized" and argparse prints the token in its error
    message.
    """

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs="?", help=argparse.SUPPRESS)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        parser.error(
            f"{option_string} is not accepted on the command line (shell history, process lists "
            f"and logs keep command lines): {TOKEN_SOURCES}"
        )


def check_secret_id(secret_id: str) -> str:
    """Return ``secret_id`` unless it looks like a Hub access token (HUB_TOKEN_RE).

    Raises:
        UsageError: it looks like a token, which would be sent to Secrets Manager as a SecretId (and
            recorded by CloudTrail); the message does not repeat it.
    """
    if HUB_TOKEN_RE.fullmatch(secret_id.strip()):
        raise UsageError(
            "--hf-token-secret-id looks like a Hub access token, not a secret name or ARN; "
            f"{TOKEN_SOURCES}"
        )
    return secret_id


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``stage-model`` (shared by ``voicectl stage-model`` and ``python -m
    stage_model``)."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--s3-uri", help="destination prefix, e.g. s3://my-bucket/models/voxtral/")
    where.add_argument(
        "--stack",
        help=f"read the destination (output {OUTPUT_MODEL_S3_URI}) and, unless given, the "
        f"repository id and revision (outputs {OUTPUT_MODEL_REPOSITORY_ID}, "
        f"{OUTPUT_MODEL_REVISION}) from this CloudFormation stack",
    )
    parser.add_argument(
        "--repo-id", help=f"Hugging Face Hub repository (default: {DEFAULT_REPO_ID})"
    )
    parser.add_argument(
        "--revision",
        help="full 40-character commit hash of the repository to stage (with --from-dir: the "
        "commit the copy was taken from, recorded in the manifest; optional)",
    )
    parser.add_argument(
        "--from-dir",
        type=Path,
        help="stage this local copy instead of downloading (files taken: "
        f"{', '.join(MODEL_FILE_PATTERNS)})",
    )
    parser.add_argument(
        "--download-dir",
        type=Path,
        help="download into this directory (default: the Hugging Face cache, reused by later runs)",
    )
    parser.add_argument("--hf-token", "--token", action=_RefuseToken)
    parser.add_argument(
        "--hf-token-secret-id",
        help="Secrets Manager secret (name or ARN) whose plain SecretString is the Hub access "
        "token; without it the token comes from the HF_TOKEN environment variable or `hf auth "
        "login`",
    )
    parser.add_argument(
        "--delete-extra",
        action="store_true",
        help="delete objects under the prefix that are not part of the model (SageMaker would "
        "copy them too): only model files directly in the prefix (weights, configuration, "
        "tokenizer, or files of the previous manifest); lists them and stops unless --yes is "
        "given; anything else under the prefix stops the run",
    )
    parser.add_argument(
        "--yes", action="store_true", help="with --delete-extra: delete without stopping first"
    )
    parser.add_argument(
        "--verify-only", action="store_true", help="only verify the prefix against its manifest"
    )
    parser.add_argument(
        "--part-size-mib",
        type=int,
        default=DEFAULT_PART_SIZE // MIB,
        help="multipart part size, MiB (default: %(default)s)",
    )
    parser.add_argument(
        "--max-concurrency",
        type=int,
        default=DEFAULT_MAX_CONCURRENCY,
        help="parts in flight (default: %(default)s)",
    )
    parser.add_argument(
        "--max-bandwidth-mib",
        type=float,
        help="cap the upload rate, MiB per second (default: none)",
    )
    parser.add_argument("--region", help="AWS Region (default: from the AWS configuration)")


def needs_region(args: argparse.Namespace) -> bool:
    """Whether the run calls a regional API: CloudFormation (``--stack``) or Secrets Manager
    (``--hf-token-secret-id``). S3 alone does not need one (boto3 finds the bucket's Region)."""
    return bool(args.stack or args.hf_token_secret_id)


def default_session(args: argparse.Namespace) -> Any:
    """A boto3 Session for ``--region``, else ``AWS_REGION``, else boto3's own chain
    (``AWS_DEFAULT_REGION``, the profile). boto3 does not read ``AWS_REGION`` itself (the AWS SDKs
    and Tools reference guide, "AWS Region", puts it first among the environment variables);
    CodeBuild sets both. ``voicectl stage-model`` passes voicectl's session helper instead, which
    also reports a missing Region or profile as bad input."""
    import boto3

    return boto3.Session(region_name=args.region or os.environ.get("AWS_REGION") or None)


def run(
    args: argparse.Namespace,
    session: Any = None,
    open_session: Callable[[argparse.Namespace], Any] = default_session,
) -> int:
    """Run ``stage-model`` with parsed ``args``.

    Args:
        session: a boto3 Session; None = ``open_session(args)``, called after the arguments are
            checked.
        open_session: makes the session from the arguments (default: :func:`default_session`).

    Every argument is checked (:func:`validate_arguments`) before any AWS call or download, and the
    credentials before the download. Returns the exit code (0 staged and verified, 1 failed).

    Raises:
        UsageError: bad input (exit code 2).
        botocore.exceptions.NoCredentialsError: no credentials are configured (``voicectl`` prints
            it as one line).
    """
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    from .files import IncompleteModelError
    from .manifest import VerificationError

    transfer = validate_arguments(args)
    if session is None:
        session = open_session(args)
    if session.get_credentials() is None:
        # Before the download (gigabytes) rather than at the first S3 call after it.
        raise NoCredentialsError()
    s3 = session.client("s3", config=Config(retries=RETRY_CONFIG))
    destination, repo_id, revision = _resolve_target(args, session)
    try:
        if args.verify_only:
            return _verify_only(s3, destination)
        return _stage(args, session, s3, destination, repo_id, revision, transfer)
    except KeyboardInterrupt:
        # Objects appear whole, and unfinished multipart uploads are kept (:mod:`.upload`), so a
        # rerun skips what is in S3 and resumes the rest.
        print(
            "voicectl stage-model: interrupted; run the same command again to resume staging to "
            f"{destination}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    except (VerificationError, IncompleteModelError) as error:
        print(f"voicectl stage-model: {error}", file=sys.stderr)
        return 1
    except (BotoCoreError, ClientError, OSError) as error:
        hint = resume_hint(error)
        print(
            f"voicectl stage-model: staging to {destination} stopped: {error}"
            + (f"\n{hint}" if hint else ""),
            file=sys.stderr,
        )
        return 1


#: ClientError codes of transient service conditions, where the same request can succeed later
#: (botocore's "standard" retry mode treats these as transient or throttling:
#: https://docs.aws.amazon.com/sdkref/latest/guide/feature-retry-behavior.html).
TRANSIENT_ERROR_CODES = frozenset(
    {
        "RequestTimeout",
        "RequestTimeoutException",
        "PriorRequestNotComplete",
        "InternalError",
        "ServiceUnavailable",
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "RequestThrottled",
        "EC2ThrottledException",
        "TransactionInProgressException",
    }
)
#: ClientError codes of expired temporary credentials (fixed by renewing them, e.g. `aws sso
#: login`).
EXPIRED_CREDENTIALS_CODES = frozenset(
    {"ExpiredToken", "ExpiredTokenException", "RequestExpired", "TokenRefreshRequired"}
)
RESUME_DETAIL = (
    "files already in S3 are skipped and unfinished multipart uploads continue where they stopped."
)


def resume_hint(error: BaseException) -> str | None:
    """The advice to print after ``error`` when running the same command again can succeed; None
    otherwise.

    Retryable: lost or timed-out connections (botocore ConnectionError / HTTPClientError, socket
    errors), server errors (HTTP 5xx) and throttling (TRANSIENT_ERROR_CODES); expired credentials
    get "renew, then rerun". Anything else (NoSuchBucket, AccessDenied, a missing secret, an
    unreadable local file) fails again the same way.
    """
    from botocore.exceptions import (
        ClientError,
        ConnectionError as BotoConnectionError,
        HTTPClientError,
    )

    retry = f"Run the same command again to resume: {RESUME_DETAIL}"
    if isinstance(error, (BotoConnectionError, HTTPClientError, ConnectionError, TimeoutError)):
        return retry
    if isinstance(error, ClientError):
        code = error.response.get("Error", {}).get("Code", "")
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        if code in EXPIRED_CREDENTIALS_CODES:
            return (
                "Renew your AWS credentials, then run the same command again to resume: "
                f"{RESUME_DETAIL}"
            )
        if code in TRANSIENT_ERROR_CODES or status >= 500:
            return retry
    return None


def validate_arguments(args: argparse.Namespace) -> Any:
    """Check every argument that can be checked without AWS; return the upload's
    ``TransferSettings``.

    Raises:
        UsageError: naming the argument, what was wrong and what is allowed.
    """
    from . import hub
    from .upload import TransferSettings

    if args.hf_token_secret_id:
        check_secret_id(args.hf_token_secret_id)
    if not (args.stack or args.s3_uri):
        raise UsageError(
            "say where to stage: --s3-uri s3://bucket/prefix/ or --stack <stack with a "
            "ModelS3Uri output>"
        )
    if args.s3_uri:
        try:
            S3Prefix.parse(args.s3_uri)
        except ValueError as error:
            raise UsageError(str(error)) from error
    # The manifest records the revision: a branch or tag name would not say what the prefix holds,
    # for a download or a local copy alike. A local copy may leave it unset (the manifest then
    # records null, an unknown revision).
    if args.revision is not None:
        try:
            hub.require_pinned(args.revision, args.repo_id or DEFAULT_REPO_ID)
        except ValueError as error:
            raise UsageError(str(error)) from error
    elif args.from_dir is None and not args.stack:
        raise UsageError(
            f"--revision is required to download {args.repo_id or DEFAULT_REPO_ID} (a full "
            "commit hash; or use --stack)"
        )
    if args.from_dir is not None and not args.from_dir.is_dir():
        raise UsageError(f"--from-dir {args.from_dir} is not a directory")
    for name in ("part_size_mib", "max_concurrency"):
        if getattr(args, name) < 1:
            raise UsageError(
                f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}"
            )
    try:
        return TransferSettings(
            part_size=args.part_size_mib * MIB,
            max_concurrency=args.max_concurrency,
            max_bandwidth=int(args.max_bandwidth_mib * MIB)
            if args.max_bandwidth_mib is not None
            else None,
        )
    except ValueError as error:
        raise UsageError(str(error)) from error


def _resolve_target(args: argparse.Namespace, session: Any) -> tuple[S3Prefix, str, str | None]:
    """(destination, repository id, revision) from the options and, with --stack, the stack's
    outputs (the arguments are already checked: :func:`validate_arguments`)."""
    outputs: dict[str, str] = {}
    if args.stack:
        outputs = _stack_outputs(session, args.stack)
        if OUTPUT_MODEL_S3_URI not in outputs:
            raise UsageError(
                f"stack {args.stack} has no output {OUTPUT_MODEL_S3_URI} (outputs: "
                f"{', '.join(sorted(outputs)) or 'none'}); pass --s3-uri instead"
            )
        uri = outputs[OUTPUT_MODEL_S3_URI]
    else:
        uri = args.s3_uri
    try:
        destination = S3Prefix.parse(uri)
    except ValueError as error:
        raise UsageError(f"stack {args.stack} output {OUTPUT_MODEL_S3_URI}: {error}") from error
    repo_id = args.repo_id or outputs.get(OUTPUT_MODEL_REPOSITORY_ID) or DEFAULT_REPO_ID
    revision = args.revision or outputs.get(OUTPUT_MODEL_REVISION)
    return destination, repo_id, revision


def _stack_outputs(session: Any, stack: str) -> dict[str, str]:
    from botocore.exceptions import ClientError

    try:
        stacks = session.client("cloudformation").describe_stacks(StackName=stack)["Stacks"]
    except ClientError as error:
        raise UsageError(f"cannot read stack {stack}: {error}") from error
    return {output["OutputKey"]: output["OutputValue"] for output in stacks[0].get("Outputs", [])}


def _verify_only(s3: Any, destination: S3Prefix) -> int:
    from .manifest import VerificationError, read_manifest, verify_prefix

    manifest = read_manifest(s3, destination)
    if manifest is None:
        raise VerificationError(
            destination, [f"{MANIFEST_NAME}: missing, so the prefix was never completely staged"]
        )
    verify_prefix(s3, destination, manifest)
    source = manifest["source"]
    print(
        f"{destination}: complete, {len(manifest['files'])} files, {manifest['total_size']} bytes "
        f"({source.get('repository')} @ {source.get('revision')})"
    )
    return 0


def _stage(
    args: argparse.Namespace,
    session: Any,
    s3: Any,
    destination: S3Prefix,
    repo_id: str,
    revision: str | None,
    settings: Any,
) -> int:
    from . import hub
    from .files import select_model_files
    from .manifest import (
        Source,
        VerificationError,
        build_manifest,
        classify_extra_keys,
        delete_keys,
        delete_manifest,
        extra_keys,
        read_manifest,
        verify_prefix,
        write_manifest,
    )
    from .upload import upload_files

    # A revision from the stack's outputs is checked here (one given on the command line already
    # was).
    if revision is not None:
        try:
            hub.require_pinned(revision, repo_id)
        except ValueError as error:
            raise UsageError(str(error)) from error
    if args.from_dir is not None:
        files = select_model_files(args.from_dir)
        source = Source("local-directory", repo_id, revision, path=str(args.from_dir.resolve()))
    else:
        if revision is None:
            raise UsageError(
                f"--revision is required to download {repo_id} (a full commit hash; or use --stack)"
            )
        token = None
        if args.hf_token_secret_id:
            token = hub.token_from_secret(args.hf_token_secret_id, session.client("secretsmanager"))
        print(
            f"downloading {repo_id} @ {revision} ({', '.join(MODEL_FILE_PATTERNS)})",
            file=sys.stderr,
        )
        files = select_model_files(hub.download(repo_id, revision, token, args.download_dir))
        problems = hub.compare_with_hub(files, hub.hub_files(repo_id, revision, token))
        if problems:
            raise VerificationError(
                destination, [f"download does not match the Hub: {p}" for p in problems]
            )

    manifest = build_manifest(source, files)
    try:
        previous = read_manifest(s3, destination)
    except VerificationError:
        previous = None  # an unreadable manifest is replaced like a stale one
    if previous != manifest:
        delete_manifest(s3, destination)

    extra = extra_keys(s3, destination, [file.name for file in files])
    if extra and not args.delete_extra:
        raise VerificationError(
            destination,
            [
                f"{key}: not part of the model (SageMaker would copy it too); remove it or pass "
                "--delete-extra"
                for key in extra
            ],
        )
    if extra:
        plan = classify_extra_keys(destination, extra, previous)
        refusals = plan.refusals(destination)
        if refusals:
            raise VerificationError(destination, refusals)
        if not args.yes:
            print(
                f"would delete {len(plan.deletable)} object(s) not part of the model: "
                f"{', '.join(plan.deletable)}\nNothing was deleted or uploaded; run again with "
                "--delete-extra --yes to delete them and stage.",
                file=sys.stderr,
            )
            return 1
        print(
            f"deleting {len(plan.deletable)} object(s) not part of the model: "
            f"{', '.join(plan.deletable)}",
            file=sys.stderr,
        )
        delete_keys(s3, destination, plan.deletable)

    total = sum(file.size for file in files)
    print(f"staging {len(files)} files ({total} bytes) to {destination}", file=sys.stderr)
    report = upload_files(s3, files, destination, settings)
    verify_prefix(s3, destination, manifest)
    if previous != manifest:
        write_manifest(s3, destination, manifest)
    print(
        f"{destination}: complete, {len(files)} files, {total} bytes; this run sent "
        f"{report.sent_bytes} bytes (uploaded {len(report.uploaded)}, resumed "
        f"{len(report.resumed)} reusing {report.reused_part_bytes} bytes, skipped "
        f"{len(report.skipped)} already present); manifest {destination.uri(MANIFEST_NAME)}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m stage_model``: the command alone (the ModelStaging build installs only boto3 and
    huggingface_hub)."""
    parser = argparse.ArgumentParser(
        prog="python -m stage_model", description=DESCRIPTION, allow_abbrev=False
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except UsageError as error:
        print(f"voicectl stage-model: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before staging started (resolving the target)
        print("voicectl stage-model: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as error:
        # No Region or credentials, or a refused request, before staging started: one line, not a
        # traceback (the build log shows it). voicectl words these more precisely
        # (voice_client/aws.py); this package cannot import voicectl.
        from botocore.exceptions import BotoCoreError, ClientError

        if not isinstance(error, (BotoCoreError, ClientError)):
            raise
        print(f"voicectl stage-model: {error}", file=sys.stderr)
        return 1
