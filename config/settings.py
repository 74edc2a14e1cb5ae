"""Typed, validated settings of the app, parsed once from CDK context.

Every setting is a flat dotted key in ``cdk.json`` ``context`` (``voxtral.instance_type``) and can
be overridden on the command line with ``-c key=value``. :func:`load_settings` reads them all,
converts each to its field's type (:mod:`config.context`), works out the capacity plan of the
Voxtral service once (:mod:`config.capacity_plan`), checks every rule and raises one
:class:`SettingsError` that lists every problem (key, value, what is allowed) before any construct
is built. Constructs receive props built from these sections, never raw context.

One module per section (:mod:`config.voxtral`, :mod:`config.sonic`, :mod:`config.ecs`,
:mod:`config.network`, :mod:`config.connect`, :mod:`config.agent`), each field named after the props
field it gives (:mod:`config.section`). The rules that concern a construct's props are the
construct's own checks, run there with the problems named after the settings' keys; the sections add
only the rules of this app (Voxtral's GPU memory, Sonic's Marketplace package, the bridge's drain
time).

Each default is declared once: in the props class when the app's is the library's
(``setting(default_from=...)``), else on the section's field. ``cdk.json`` lists every key with its
default so users can see every setting in one place (a test keeps it equal to
:func:`default_context`).
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, get_type_hints

from config import context as ctx
from config.agent import DEFAULT_LLM_MODEL_ID, AgentSettings
from config.bridge import bridge_problems
from config.capacity_plan import CapacityPlan, plan_capacity
from config.connect import ConnectSettings
from config.context import setting
from config.ecs import EcsSettings
from config.endpoint import EndpointSettings
from config.models import SONIC_MODEL_PACKAGES
from config.network import EncryptionSettings, NetworkSettings
from config.section import Section
from config.sonic import SonicSettings
from config.voxtral import VoxtralSettings
from constructs_lib.facts.names import REGION_RE, check_email
from constructs_lib.sagemaker_endpoint.props import RealtimeEndpointProps, check_log_retention_days
from constructs_lib.validation import Problems, show

__all__ = [
    "DEFAULT_LLM_MODEL_ID",
    "KNOWN_KEYS",
    "SECTIONS",
    "AgentSettings",
    "CapacityPlan",
    "ConnectSettings",
    "EcsSettings",
    "EncryptionSettings",
    "EndpointSettings",
    "NetworkSettings",
    "Settings",
    "SettingsError",
    "SonicSettings",
    "VoxtralSettings",
    "default_context",
    "load_settings",
]


class SettingsError(ValueError):
    """One or more settings are invalid. ``problems`` lists one message per problem."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__(
            "Invalid settings (cdk.json context or -c key=value):\n"
            + "\n".join(f"  - {p}" for p in problems)
        )


#: The capacity plan of :class:`Settings` before :func:`load_settings` works it out (no instance
#: type).
NO_PLAN = CapacityPlan(types=(), target_fraction=0.0)


@dataclass(frozen=True)
class Settings(Section):
    """All settings of the app. Built only by :func:`load_settings`."""

    #: Region of every stack.
    region: str = "us-east-1"
    #: Stack names are ``<stack_name_prefix>-Operations``, ``-Artifacts``, ``-Voxtral``, ``-Sonic``
    #: (and the optional ``-Foundation``, ``-VoxtralEcs``, ``-SonicEcs``, ``-Connect``).
    stack_name_prefix: str = "RealtimeVoice"
    #: Keep the buckets (and objects) and the ECR repository (and images) on ``cdk destroy``. The
    #: endpoints' log groups always go with their stack: they have the fixed names SageMaker writes
    #: to, so a retained group would make the next deploy fail ("already exists"); export logs you
    #: must keep first.
    retain_data: bool = False
    #: Retention of the endpoints' log groups, days (a CloudWatch Logs value).
    log_retention_days: int = setting(default_from=RealtimeEndpointProps)
    #: Subscribe this address to the alarm topic (SNS e-mails a confirmation link first); None = no
    #: subscription.
    alarm_email: str | None = None
    voxtral: VoxtralSettings = field(default_factory=VoxtralSettings)
    sonic: SonicSettings = field(default_factory=SonicSettings)
    ecs: EcsSettings = field(default_factory=EcsSettings)
    network: NetworkSettings = field(default_factory=NetworkSettings)
    encryption: EncryptionSettings = field(default_factory=EncryptionSettings)
    connect: ConnectSettings = field(default_factory=ConnectSettings)
    agent: AgentSettings = field(default_factory=AgentSettings)
    #: Not a setting: what each instance type the Voxtral service may run serves, worked out once by
    #: :func:`load_settings` from the settings above.
    capacity_plan: CapacityPlan = field(default=NO_PLAN, metadata=ctx.DERIVED)

    @property
    def uses_ecs(self) -> bool:
        """Whether an enabled service runs on the ECS target (``voxtral.target`` or
        ``sonic.target``)."""
        return (self.voxtral.enabled and self.voxtral.target == "ecs") or self.sonic_on_ecs

    @property
    def sonic_on_ecs(self) -> bool:
        return self.sonic.enabled and self.sonic.target == "ecs"

    @property
    def makes_key(self) -> bool:
        """Whether the stacks make the data key (encryption.create_key, defaulting to
        network.mode=vpc)."""
        encryption = self.encryption
        if encryption.kms_key_arn is not None:
            return False
        return self.network.private if encryption.create_key is None else encryption.create_key

    @property
    def uses_key(self) -> bool:
        """Whether the data is under a customer managed key (given or made)."""
        return self.makes_key or self.encryption.kms_key_arn is not None

    @property
    def encrypts_repository(self) -> bool:
        """Whether the ECR repository uses the key (replaces an existing repository:
        docs/private-deployment.md)."""
        repository = self.encryption.repository
        wanted = self.network.private if repository is None else repository
        return self.uses_key and wanted

    @property
    def sonic_model_package_arn(self) -> str:
        """The Sonic model package for ``region`` (validated: present whenever Sonic is enabled)."""
        return self.sonic.model_package_arn or SONIC_MODEL_PACKAGES.get(self.region, "")

    def problems(self) -> list[str]:
        """Every problem of the settings (empty when valid)."""
        p = Problems()
        if not REGION_RE.fullmatch(self.region):
            p.add("region", self.region, "must be an AWS region code such as 'us-east-1'")
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9-]{0,63}", self.stack_name_prefix):
            p.add(
                "stack_name_prefix",
                self.stack_name_prefix,
                "must start with a letter; letters, digits and '-' only",
            )
        check_log_retention_days(p, "log_retention_days", self.log_retention_days)
        if self.alarm_email is not None:
            check_email(p, "alarm_email", self.alarm_email)
        if not self.voxtral.enabled and not self.sonic.enabled:
            p.note(
                "voxtral.enabled=false and sonic.enabled=false: at least one endpoint must be "
                "enabled"
            )
        problems = [*p, *self.network.problems(self.region), *self.encryption.problems(self.region)]
        if self.network.private and not self.uses_key:
            problems.append(
                "encryption.create_key=false with network.mode='vpc': a private deployment is "
                "held to cdk-nag's HIPAA Security and NIST 800-53 rev 5 checks, which need a "
                "customer managed key on its logs and buckets, so synth would fail; leave "
                "encryption.create_key unset (the stacks make a key) or set "
                "encryption.kms_key_arn to yours"
            )
        if self.encryption.repository and not self.uses_key:
            problems.append(
                "encryption.repository=true: needs a key (encryption.kms_key_arn or "
                "encryption.create_key)"
            )
        voxtral = self.voxtral.problems("voxtral", self) if self.voxtral.enabled else []
        problems += voxtral
        if self.sonic.enabled:
            problems += self.sonic.problems("sonic", self)
        ecs: list[str] = []
        if self.voxtral.enabled and self.voxtral.target == "ecs":
            ecs = self._ecs_problems()
            problems += ecs
        elif self.sonic_on_ecs:
            problems += self.ecs.shared_problems(self)
        if self.voxtral.enabled and not voxtral and not ecs:
            # the environment is built from the voxtral.* (and ecs.*) keys: only once they passed
            problems += bridge_problems(self)
        problems += self.connect.problems(self)
        problems += self.agent.problems(self)
        if (
            self.voxtral.enabled
            and self.sonic.enabled
            and self.voxtral.endpoint_name.lower() == self.sonic.endpoint_name.lower()
        ):
            problems.append(
                f"sonic.endpoint_name={show(self.sonic.endpoint_name)}: must differ "
                "from voxtral.endpoint_name (endpoint names are unique per account and "
                "region, case-insensitively)"
            )
        return problems

    def _ecs_problems(self) -> list[str]:
        """The ecs.* keys' problems with voxtral.target=ecs."""
        problems = self.ecs.problems(self)
        if self.network.private and self.ecs.internet_facing:
            problems.append(
                "ecs.load_balancer='internet_facing' with network.mode='vpc': the "
                "private network has no internet gateway; use "
                "ecs.load_balancer='internal' (callers reach it from the VPC, "
                "peered networks or on premises), or network.mode='public'"
            )
        return problems


# --- Parsing --------------------------------------------------------------------------------------


def _sections() -> dict[str, type]:
    """``{"": Settings, "voxtral.": VoxtralSettings, ...}``: the sections are the fields of
    :class:`Settings` whose type is a dataclass (the capacity plan aside: it is no section)."""
    hints = get_type_hints(Settings)
    return {
        "": Settings,
        **{
            f"{f.name}.": hints[f.name]
            for f in dataclasses.fields(Settings)
            if dataclasses.is_dataclass(hints[f.name]) and not f.metadata.get("derived")
        },
    }


#: Each section by the prefix of its keys (the keys of :class:`Settings` itself have none).
SECTIONS: dict[str, type] = _sections()
KNOWN_KEYS = ctx.known_keys(SECTIONS)


def default_context() -> dict[str, Any]:
    """Every setting with its default, as flat dotted keys (what ``cdk.json`` lists)."""
    return ctx.defaults(SECTIONS)


def load_settings(context: Mapping[str, Any]) -> Settings:
    """Parse and validate ``context`` (CDK context: cdk.json plus ``-c`` overrides) into
    :class:`Settings`.

    Args:
        context: flat mapping of context keys to values; ``-c`` values are strings, cdk.json
            values JSON types. Keys owned by the CDK itself (``@aws-cdk/...`` feature flags, keys
            containing ``:``) are ignored.

    Returns:
        The frozen settings, with their capacity plan.

    Raises:
        SettingsError: listing every invalid or unknown key, with the value given and what is
            allowed.
    """
    problems: list[str] = []
    values: dict[str, dict[str, Any]] = {prefix: {} for prefix in SECTIONS}
    for name, raw in context.items():
        if ctx.is_cdk_key(name):
            continue
        key = KNOWN_KEYS.get(name)
        if key is None:
            close = difflib.get_close_matches(name, KNOWN_KEYS, n=1, cutoff=0.6)
            hint = (
                f"; did you mean '{close[0]}'?"
                if close
                else f"; known keys: {', '.join(sorted(KNOWN_KEYS))}"
            )
            problems.append(f"unknown setting '{name}'{hint}")
            continue
        try:
            values[key.prefix][key.field] = key.convert(raw)
        except ValueError as error:
            problems.append(f"{name}={show(raw)}: {error}")

    sections = {
        prefix[:-1]: section(**values[prefix]) for prefix, section in SECTIONS.items() if prefix
    }
    plan = plan_capacity(sections["voxtral"], sections["ecs"].instance_type)
    settings = Settings(**values[""], **sections, capacity_plan=plan)
    # Validate even when some keys failed to convert (they keep their defaults), so one run reports
    # every problem.
    problems.extend(settings.problems())
    if problems:
        raise SettingsError(problems)
    return settings
