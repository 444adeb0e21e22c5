"""``python -m llm_compiler.models``: serve the embedded model in the foreground."""

import sys

from llm_compiler.models.cli import main

sys.exit(main())
