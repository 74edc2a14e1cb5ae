"""Allows ``python -m voicectl``."""

import sys

from voicectl.cli import main

sys.exit(main())
