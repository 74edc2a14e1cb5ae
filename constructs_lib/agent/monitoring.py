"""The voice agent's metrics, alarm rules and its row of the shared operations dashboard:
:func:`agent_metric`, :func:`agent_alarm_rules` (the rules
:class:`~constructs_lib.agent.service.VoiceAgentService` makes its alarms from) and
:func:`dashboard_rows`. They take the deployment's name, never a construct of the service: the
Operations stack, which deploys first, names the agent's metrics and alarms as literals.
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Duration, Stack, aws_cloudwatch as cloudwatch
from constructs import Construct

from constructs_lib.agent.props import (
    ACTIVE_SESSIONS,
    METRIC_DIMENSION,
    METRIC_NAMESPACE,
    SESSIONS_FAILED,
    STAGE_ERRORS,
    VOICE_TO_VOICE_MS,
)
from constructs_lib.monitoring.alarms import AlarmRule
from constructs_lib.monitoring.dashboard import ALARM_COLOR

#: Alarm names, in the order :func:`agent_alarm_rules` builds them.
ALARM_RULE_NAMES = (
    "sessions-failed",
    "voice-to-voice-p95",
    *(f"{stage}-errors" for stage in STAGE_ERRORS),
)
#: What each stage calls (the alarms' descriptions point to its own alarms).
STAGE_SERVICES = {"stt": "Voxtral", "llm": "LLM", "tts": "Sonic"}
#: Minutes of the voice-to-voice alarm: 3 breaching of 5 (a sustained slowness, not one slow turn).
LATENCY_MINUTES, LATENCY_BREACHING = 5, 3


def agent_metric(
    deployment: str, name: str, statistic: str, label: str | None = None
) -> cloudwatch.Metric:
    return cloudwatch.Metric(
        namespace=METRIC_NAMESPACE,
        metric_name=name,
        statistic=statistic,
        dimensions_map={METRIC_DIMENSION: deployment},
        period=Duration.minutes(1),
        label=label,
    )


def alarm_name(deployment: str, rule: str) -> str:
    """The AlarmName of one of the agent's alarms (fixed, so the shared dashboard shows them)."""
    return f"{deployment}-agent-{rule}"


def agent_alarm_rules(deployment: str, voice_to_voice_p95_ms: float) -> list[AlarmRule]:
    """The agent's alarm rules (names in :data:`ALARM_RULE_NAMES`)."""
    gt = cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD
    not_breaching = cloudwatch.TreatMissingData.NOT_BREACHING
    rules = [
        AlarmRule(
            "sessions-failed",
            agent_metric(deployment, SESSIONS_FAILED, "Sum"),
            gt,
            0,
            1,
            1,
            not_breaching,
            "Voice agent sessions ended on an error: see the agent's logs.",
            "the bot reports a failure only when one happens",
        ),
        AlarmRule(
            "voice-to-voice-p95",
            agent_metric(deployment, VOICE_TO_VOICE_MS, "p95"),
            gt,
            voice_to_voice_p95_ms,
            LATENCY_MINUTES,
            LATENCY_BREACHING,
            not_breaching,
            "Callers wait too long for answers: the p95 from the end of their speech to the "
            "first audio of the answer is high (see the stage errors and the endpoints' "
            "latency).",
            "no datapoint means no turn was answered",
        ),
    ]
    for stage, metric_name in STAGE_ERRORS.items():
        rules.append(
            AlarmRule(
                f"{stage}-errors",
                agent_metric(deployment, metric_name, "Sum"),
                gt,
                0,
                1,
                1,
                not_breaching,
                f"The voice agent's {stage.upper()} stage failed: see the agent's logs and the "
                f"{STAGE_SERVICES[stage]} alarms.",
                "the bot reports an error only when one happens",
            )
        )
    assert tuple(rule.name for rule in rules) == ALARM_RULE_NAMES
    return rules


def dashboard_rows(
    scope: Construct, deployment: str, max_sessions_per_task: int, voice_to_voice_p95_ms: float
) -> list[list[cloudwatch.IWidget]]:
    """The voice agent's row of the shared operations dashboard: its metrics by namespace and
    dimension and its alarms by name (literals: nothing of the Agent stack is referenced, and the
    Operations stack deploys first)."""
    stack = Stack.of(scope)
    header = cloudwatch.TextWidget(
        markdown=(
            f"## Voice agent\nPipecat bot on Fargate, up to {max_sessions_per_task} sessions per "
            "task. Red lines are alarm thresholds."
        ),
        width=24,
        height=2,
    )
    sessions = cloudwatch.GraphWidget(
        title="Live sessions per task",
        width=6,
        left=[
            agent_metric(deployment, ACTIVE_SESSIONS, "Average", "average"),
            agent_metric(deployment, ACTIVE_SESSIONS, "Maximum", "busiest task"),
        ],
        left_annotations=[
            cloudwatch.HorizontalAnnotation(value=max_sessions_per_task, label="sessions per task")
        ],
    )
    latency = cloudwatch.GraphWidget(
        title="Voice to voice (ms)",
        width=6,
        left=[
            agent_metric(deployment, VOICE_TO_VOICE_MS, "p50", "p50"),
            agent_metric(deployment, VOICE_TO_VOICE_MS, "p95", "p95"),
        ],
        left_annotations=[
            cloudwatch.HorizontalAnnotation(
                value=voice_to_voice_p95_ms,
                label=f"alarm p95: {voice_to_voice_p95_ms:g} ms",
                color=ALARM_COLOR,
            )
        ],
    )
    errors = cloudwatch.GraphWidget(
        title="Failed sessions and stage errors",
        width=6,
        left=[
            agent_metric(deployment, SESSIONS_FAILED, "Sum", SESSIONS_FAILED),
            *(agent_metric(deployment, name, "Sum", name) for name in STAGE_ERRORS.values()),
        ],
    )
    status = cloudwatch.AlarmStatusWidget(
        title="Voice agent alarms",
        width=6,
        alarms=[
            cloudwatch.Alarm.from_alarm_arn(
                scope,
                f"AgentAlarm{i}",
                stack.format_arn(
                    service="cloudwatch",
                    resource="alarm",
                    resource_name=alarm_name(deployment, rule),
                    arn_format=ArnFormat.COLON_RESOURCE_NAME,
                ),
            )
            for i, rule in enumerate(ALARM_RULE_NAMES)
        ],
    )
    return [[header], [sessions, latency, errors, status]]


def metric_dimensions(deployment: str) -> dict[str, str]:
    """METRIC_DIMENSIONS of the bot: the Deployment dimension its metrics carry."""
    return {METRIC_DIMENSION: deployment}
