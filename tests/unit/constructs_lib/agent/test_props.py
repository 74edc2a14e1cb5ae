"""The agent's props checks: model ids and profiles by Region, URLs, Fargate sizes, session
limits."""

from __future__ import annotations

import pytest

from constructs_lib.agent.props import (
    AgentSizing,
    check_llm_model_id,
    check_llm_url,
    split_profile,
    task_protection_minutes,
)
from constructs_lib.validation import Problems


@pytest.mark.parametrize(
    "model_id, region, ok",
    [
        ("amazon.nova-lite-v1:0", "eu-west-1", True),
        ("us.anthropic.claude-haiku-4-5-20251001-v1:0", "us-west-2", True),
        ("us.anthropic.claude-haiku-4-5-20251001-v1:0", "eu-west-1", False),
        ("us.anthropic.claude-haiku-4-5-20251001-v1:0", "us-gov-west-1", False),
        ("eu.anthropic.claude-haiku-4-5-20251001-v1:0", "eu-central-1", True),
        ("global.anthropic.claude-haiku-4-5-20251001-v1:0", "ap-south-1", True),
        ("claude", "us-east-1", False),
    ],
)
def test_model_ids_and_profiles_by_region(model_id, region, ok):
    p = Problems()
    check_llm_model_id(p, "llm_model_id", model_id, region)
    assert (len(p) == 0) == ok, list(p)


def test_a_profile_splits_into_its_geography_and_model():
    assert split_profile("us-gov.meta.llama3-8b-instruct-v1:0") == (
        "us-gov",
        "meta.llama3-8b-instruct-v1:0",
    )
    assert split_profile("amazon.nova-lite-v1:0") == (None, "amazon.nova-lite-v1:0")


@pytest.mark.parametrize(
    "url, ok", [("https://llm.internal/v1", True), ("ftp://x", False), ("https://x/v1?k=1", False)]
)
def test_llm_urls(url, ok):
    p = Problems()
    check_llm_url(p, "llm_url", url)
    assert (len(p) == 0) == ok


def test_sizing_refuses_a_pair_fargate_does_not_run_and_an_idle_time_past_the_session():
    p = Problems()
    AgentSizing(cpu=512, memory_mib=512, idle_s=1800, max_session_s=1800).problems(p)
    assert list(p) == [
        "memory_mib=512: must be a memory Fargate pairs with cpu=512: 1024-4096 MiB in steps of "
        "1024",
        "idle_s=1800: must be less than max_session_s=1800",
    ]
    assert AgentSizing(max_sessions_per_task=10).scaling_target == 7.0
    assert task_protection_minutes(1800) == 31
