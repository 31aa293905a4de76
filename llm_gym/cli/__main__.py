"""`python -m llm_gym.cli ...`: the same as the `llm-gym` console script."""

import sys

from llm_gym.cli import main

sys.exit(main())
