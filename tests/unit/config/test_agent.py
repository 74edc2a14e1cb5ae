"""config/agent.py: the voice agent's settings; its sizing is the props' own (AgentSizing), defaults
included. What the agent's settings refuse with the stack's context:
tests/app/test_agent_stack.py."""

from __future__ import annotations

import pytest

from config.agent import AgentSettings
from config.settings import SettingsError, load_settings
from constructs_lib.agent.props import AgentSizing
from contracts.agent_env import DEFAULT_LANGUAGE
from contracts.sonic import SONIC_LANGUAGES
from tests.conftest import cdk_json_context


def test_the_sizing_is_built_from_the_fields_and_defaults_to_the_props():
    assert AgentSettings().sizing() == AgentSizing()
    sizing = AgentSettings(cpu=2048, memory_mib=4096, max_sessions_per_task=6, idle_s=30).sizing()
    assert (
        sizing.cpu,
        sizing.memory_mib,
        sizing.max_sessions_per_task,
        sizing.idle_s,
        sizing.max_tasks,
    ) == (2048, 4096, 6, 30, 4)


def test_the_language_defaults_to_the_bots_and_is_one_sonic_speaks():
    assert AgentSettings().language == DEFAULT_LANGUAGE == "en"
    assert DEFAULT_LANGUAGE in SONIC_LANGUAGES


def test_the_sizing_props_report_under_the_agents_keys():
    with pytest.raises(SettingsError) as caught:
        load_settings(
            {
                **cdk_json_context(),
                "agent.enabled": True,
                "agent.min_tasks": 3,
                "agent.max_tasks": 2,
            }
        )
    assert caught.value.problems == ["agent.max_tasks=2: must be at least agent.min_tasks=3"]


def test_a_disabled_agent_is_not_checked():
    assert load_settings({**cdk_json_context(), "agent.cpu": 1000}).agent.cpu == 1000


@pytest.mark.parametrize("unset", ["", "null", None])
def test_an_empty_greeting_means_none_the_agent_waits_for_the_caller(unset):
    """docs/settings.md: "null (or empty) = it says nothing and waits for the caller"; the stack
    writes AGENT_GREETING empty then, which the bot reads as no greeting."""
    loaded = load_settings({**cdk_json_context(), "agent.greeting": unset})
    assert loaded.agent.greeting is None
    said = load_settings({**cdk_json_context(), "agent.greeting": " Hi. "})
    assert said.agent.greeting == "Hi."
