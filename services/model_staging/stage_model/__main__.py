"""``python -m stage_model``: what the ModelStaging build runs (the same options as ``voicectl
stage-model``)."""

import sys

from .command import main

sys.exit(main())
