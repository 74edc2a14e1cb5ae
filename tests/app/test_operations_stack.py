"""The <prefix>-Operations stack's template: the alarm topic and its key, the shared dashboard.
Tests that read this stack together with another are in test_cross_stack.py; cfn-lint and cdk-nag
over each variant in test_lint.py; settings refused before a synth in test_settings_app.py."""

from __future__ import annotations

import json

import pytest

from tests.app.kit import resources

# --- The alarm topic and the dashboard -----------------------------------------------------------
# The Operations stack: the alarm topic (KMS, TLS only, CloudWatch may publish, optional e-mail) and
# the dashboard (widgets per endpoint, alarm thresholds drawn in each graph's unit).


def dashboard_body(template: dict) -> dict:
    """The dashboard's JSON body with the template's Fn::Join of region references flattened."""
    ((_, dashboard),) = resources(template, "AWS::CloudWatch::Dashboard").items()
    body = dashboard["Properties"]["DashboardBody"]
    if isinstance(body, dict):
        body = "".join(
            part if isinstance(part, str) else "us-east-1" for part in body["Fn::Join"][1]
        )
    return json.loads(body)


def graphs(body: dict) -> dict[str, list[dict]]:
    """``{graph title: [widget, ...]}`` (titles repeat once per endpoint)."""
    out: dict[str, list[dict]] = {}
    for widget in body["widgets"]:
        if widget["type"] == "metric":
            out.setdefault(widget["properties"]["title"], []).append(widget)
    return out


def annotation_values(widget: dict) -> dict[str, float]:
    return {
        a["label"]: a["value"]
        for a in widget["properties"].get("annotations", {}).get("horizontal", [])
    }


def test_alarm_topic_is_encrypted_tls_only_and_open_to_cloudwatch_alarms(synthesized):
    template = synthesized.template("Operations")
    ((key_id, key),) = resources(template, "AWS::KMS::Key").items()
    assert key["Properties"]["EnableKeyRotation"] is True
    assert key["DeletionPolicy"] == "Delete" and key["Properties"]["PendingWindowInDays"] == 7
    key_statements = {s.get("Sid"): s for s in key["Properties"]["KeyPolicy"]["Statement"]}
    cloudwatch = key_statements["CloudWatchAlarmsEncryptNotifications"]
    assert cloudwatch["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    assert sorted(cloudwatch["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey*"]

    ((topic_id, topic),) = resources(template, "AWS::SNS::Topic").items()
    assert topic["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    ((_, policy),) = resources(template, "AWS::SNS::TopicPolicy").items()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    (deny,) = [s for s in statements if s["Effect"] == "Deny"]
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert deny["Principal"] == "*" and deny["Resource"] == {"Ref": topic_id}
    (publish,) = [s for s in statements if s.get("Sid") == "CloudWatchAlarmsPublish"]
    assert publish["Action"] == "sns:Publish" and publish["Principal"] == {
        "Service": "cloudwatch.amazonaws.com"
    }
    assert json.dumps(publish["Condition"]["ArnLike"]["aws:SourceArn"]).count(":alarm:*") == 1
    # No e-mail by default.
    assert resources(template, "AWS::SNS::Subscription") == {}
    outputs = template["Outputs"]
    assert outputs["AlarmTopicArn"]["Value"] == {"Ref": topic_id}


def test_alarm_email_subscribes_one_address(ops_variant):
    ((_, subscription),) = resources(
        ops_variant.template("Operations"), "AWS::SNS::Subscription"
    ).items()
    assert subscription["Properties"]["Protocol"] == "email"
    assert subscription["Properties"]["Endpoint"] == "oncall@example.com"


def test_dashboard_has_a_row_per_endpoint_with_every_graph(synthesized):
    template = synthesized.template("Operations")
    ((_, dashboard),) = resources(template, "AWS::CloudWatch::Dashboard").items()
    assert dashboard["Properties"]["DashboardName"] == "RealtimeVoice-us-east-1"
    body = dashboard_body(template)
    headers = [w["properties"]["markdown"] for w in body["widgets"] if w["type"] == "text"]
    assert [h.splitlines()[0] for h in headers] == [
        "## Voxtral speech to text: `voxtral-realtime`",
        "## Sonic text to speech: `sonic-tts`",
    ]
    by_title = graphs(body)
    assert sorted((title, len(widgets)) for title, widgets in by_title.items()) == [
        ("Errors (per 5 minutes)", 2),
        ("GPU and memory use (% of capacity)", 2),
        ("Instances", 2),
        ("Invocations", 1),
        ("Latency p90 (ms)", 2),
        ("Live streams per instance", 1),
        ("Time to first delta (ms)", 1),
    ]
    for title, widgets in by_title.items():
        for widget in widgets:
            for metric in widget["properties"]["metrics"]:
                dimensions = json.dumps(metric)
                if "expression" not in dimensions:
                    assert "EndpointName" in dimensions and "AllTraffic" in dimensions, title


def test_dashboard_draws_alarm_thresholds_in_each_graphs_unit(synthesized):
    by_title = graphs(dashboard_body(synthesized.template("Operations")))
    voxtral_latency, sonic_latency = by_title["Latency p90 (ms)"]
    # Latency graphs are in ms: the µs thresholds are drawn back in ms.
    assert annotation_values(voxtral_latency) == {
        "alarm ModelLatencyP90: 500 ms": 500,
        "alarm OverheadLatencyP90: 100 ms": 100,
    }
    assert annotation_values(sonic_latency)["alarm ModelLatencyP90: 3000 ms"] == 3000
    expressions = [
        m[0]["expression"] for m in voxtral_latency["properties"]["metrics"] if "expression" in m[0]
    ]
    assert expressions == ["model / 1000", "overhead / 1000"]

    (streams,) = by_title["Live streams per instance"]
    assert annotation_values(streams) == {
        "stream cap 4": 4,
        "alarm ActiveStreamsNearCap: 3.6 streams": 3.6,
        "scaling target 2.8": pytest.approx(2.8),
    }
    (first_delta,) = by_title["Time to first delta (ms)"]
    assert annotation_values(first_delta) == {"alarm TimeToFirstDeltaP90: 2000 ms": 2000}

    voxtral_usage, _ = by_title["GPU and memory use (% of capacity)"]
    assert annotation_values(voxtral_usage) == {
        "alarm GPUUtilization: 90 %": 90,
        "alarm GPUMemoryUtilization: 97 %": 97,
        "alarm CPUUtilization: 90 %": 90,
        "alarm MemoryUtilization: 90 %": 90,
        "alarm DiskUtilization: 85 %": 85,
    }
    voxtral_errors, sonic_errors = by_title["Errors (per 5 minutes)"]
    # The rollback alarm's rate (a fraction) is drawn in percent on the right axis (Voxtral only).
    assert annotation_values(voxtral_errors) == {
        "alarm Invocation5XXErrors: 0": 0,
        "alarm Invocation4XXErrors: 10": 10,
        "alarm Invocation5XXErrorRate: 5 % (rolls updates back)": 5,
    }
    assert annotation_values(sonic_errors) == {
        "alarm Invocation5XXErrors: 0": 0,
        "alarm Invocation4XXErrors: 10": 10,
    }
    rate_lines = [m for m in voxtral_errors["properties"]["metrics"] if "expression" in m[0]]
    assert rate_lines == [
        [
            {
                "label": "5XX error rate (% of requests per minute)",
                "expression": "rate * 100",
                "period": 60,
                "yAxis": "right",
            }
        ]
    ]
    # 5XX, 4XX, UpstreamErrors, StreamsRejected, plus the rate expression and its hidden metric.
    assert (
        len(voxtral_errors["properties"]["metrics"]) == 6
        and len(sonic_errors["properties"]["metrics"]) == 2
    )
    voxtral_instances, _ = by_title["Instances"]
    assert annotation_values(voxtral_instances) == {
        "max 4": 4,
        "min 1": 1,
        "alarm EndpointHealth: 1 (below: no instance)": 1,
    }


def test_dashboard_utilisation_is_percent_of_capacity_on_a_multi_gpu_instance(ops_variant):
    _, sonic_usage = graphs(dashboard_body(ops_variant.template("Operations")))[
        "GPU and memory use (% of capacity)"
    ]
    expressions = [
        m[0]["expression"] for m in sonic_usage["properties"]["metrics"] if "expression" in m[0]
    ]
    assert expressions == ["gpu / 4", "gpumem / 4", "cpu / 48"]  # ml.g6e.12xlarge: 4 GPUs, 48 vCPUs
    assert (
        annotation_values(sonic_usage)["alarm GPUUtilization: 90 %"] == 90
    )  # the 360 threshold, drawn as 90 %


def metric_lines(widget: dict) -> list[tuple[str, str, int, str | None]]:
    """``(metric name, statistic, period s, label)`` of each plain metric of a graph (hidden ones of
    math expressions included). The CDK leaves out the widget defaults: statistic Average and period
    300 s (CloudWatch dashboard body structure, metric widget ``stat`` and ``period``)."""
    lines = []
    for entry in widget["properties"]["metrics"]:
        if "expression" in entry[0]:
            continue
        options = entry[-1] if isinstance(entry[-1], dict) else {}
        lines.append(
            (
                entry[1],
                options.get("stat", "Average"),
                options.get("period", 300),
                options.get("label"),
            )
        )
    return lines


def test_custom_graph_labels_are_kept(synthesized):
    """A label given to a metric is not replaced by the default one (a count graph labelled
    Percent)."""
    by_title = graphs(dashboard_body(synthesized.template("Operations")))
    voxtral_instances, sonic_instances = by_title["Instances"]
    for widget in (voxtral_instances, sonic_instances):
        assert [label for *_, label in metric_lines(widget)] == [
            "Instances (CPUUtilization samples per minute)"
        ]
    (streams,) = by_title["Live streams per instance"]
    assert [label for *_, label in metric_lines(streams)] == [
        "Live streams per instance (ActiveStreams, Average)",
        "Busiest instance (ActiveStreams, Maximum)",
        "StreamsStarted (Sum, Count)",
        "StreamsRejected (Sum, Count)",
    ]


def test_utilisation_graph_plots_what_the_alarms_evaluate(synthesized):
    """Same statistic and period as each alarm: Maximum for GPU memory, memory and disk; Average for
    GPU and CPU."""
    by_title = graphs(dashboard_body(synthesized.template("Operations")))
    voxtral_usage, sonic_usage = by_title["GPU and memory use (% of capacity)"]
    for widget in (voxtral_usage, sonic_usage):
        assert [line[:3] for line in metric_lines(widget)] == [
            ("GPUUtilization", "Average", 300),
            ("GPUMemoryUtilization", "Maximum", 300),
            ("CPUUtilization", "Average", 300),
            ("MemoryUtilization", "Maximum", 300),
            ("DiskUtilization", "Maximum", 300),
        ]
    labels = [m[0]["label"] for m in voxtral_usage["properties"]["metrics"] if "expression" in m[0]]
    assert labels == [
        "GPUUtilization (Average, % of 1 GPU)",
        "GPUMemoryUtilization (Maximum, % of 1 GPU)",
        "CPUUtilization (Average, % of 4 vCPUs)",
    ]
    periods = [
        m[0].get("period", 300)
        for m in voxtral_usage["properties"]["metrics"]
        if "expression" in m[0]
    ]
    assert periods == [300, 300, 300]
    assert [label for *_, label in metric_lines(voxtral_usage)][3:] == [
        "MemoryUtilization (Maximum, Percent)",
        "DiskUtilization (Maximum, Percent)",
    ]


# --- Instance pools -----------------------------------------------------------------------------
# Capacity fallback: ``voxtral.instance_pools`` and ``sonic.instance_pools`` as the
# ProductionVariant's InstancePools, with every rule sized by the instance holding for each pool's
# type (settings, alarms, dashboard, quotas).


def test_the_dashboard_draws_the_thresholds_the_alarms_use(pools_variant):
    (dashboard,) = resources(
        pools_variant.template("Operations"), "AWS::CloudWatch::Dashboard"
    ).values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    assert (
        "ml.g6e.12xlarge (4 x NVIDIA L40S, 48 vCPUs), else ml.g6e.2xlarge (1 x NVIDIA L40S, 8 "
        "vCPUs)" in body
    )
    assert "% of 1 GPU" in body and "% of 8 vCPUs" in body
