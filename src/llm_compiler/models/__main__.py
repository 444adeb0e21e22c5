"""``python -m llm_compiler.models``: serve the embedded model in the foreground."""

import sys

from llm_compiler.models.cli import main

if __name__ == "__main__":  # not when a tool imports every module of the package
    sys.exit(main())
