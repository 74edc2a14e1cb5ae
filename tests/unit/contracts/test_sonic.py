"""contracts.sonic: the language codes Sonic takes, one list for the settings and the clients."""

import config.agent
from contracts.sonic import SONIC_LANGUAGES
from voice_client import sonic


def test_the_list_is_sonic_3_6s_as_cartesia_publishes_it():
    assert {"en", "en-US", "fr", "de", "es-MX", "ja", "zh", "hi"} <= SONIC_LANGUAGES
    assert "xx" not in SONIC_LANGUAGES
    assert all(code.split("-")[0].islower() for code in SONIC_LANGUAGES)


def test_the_settings_and_the_client_read_the_same_list():
    assert config.agent.SONIC_LANGUAGES is SONIC_LANGUAGES
    assert sonic.SONIC_LANGUAGES is SONIC_LANGUAGES
