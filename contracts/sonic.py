"""What crosses the wall to Cartesia Sonic: the language codes a request may name."""

from __future__ import annotations

from typing import Final

#: Language codes listed for Sonic 3.6 on SageMaker (cartesia-aws
#: ``sonic-3-6-jumpstart/README.md``): the settings check ``agent.language`` against them and the
#: clients check each request.
SONIC_LANGUAGES: Final = frozenset(
    [
        "ar",
        "bg",
        "bn",
        "cs",
        "da",
        "de",
        "el",
        "en",
        "es",
        "fi",
        "fr",
        "gu",
        "he",
        "hi",
        "hr",
        "hu",
        "id",
        "it",
        "ja",
        "ka",
        "kn",
        "ko",
        "ml",
        "mr",
        "ms",
        "nl",
        "no",
        "pa",
        "pl",
        "pt",
        "ro",
        "ru",
        "sk",
        "sv",
        "ta",
        "te",
        "th",
        "tl",
        "tr",
        "uk",
        "vi",
        "zh",
        "en-US",
        "de-DE",
        "es-MX",
        "fr-FR",
        "hi-IN",
        "it-IT",
        "ja-JP",
        "nl-NL",
        "pt-BR",
    ]
)
