"""Run ``llama_cpp.server`` as a child that never outlives its parent.

The parent holds this process's stdin open and never writes to it. When the parent exits
for any reason (even SIGKILL) the pipe closes, the blocking read below returns, and the
server exits at once.
"""

from __future__ import annotations

import os
import sys
import threading


def _exit_when_orphaned() -> None:
    # Raw reads: a daemon thread blocked in sys.stdin's buffered reader would abort
    # interpreter shutdown (it holds the buffer's lock).
    while os.read(0, 4096):  # returns b"" at end of file: the parent is gone
        pass
    os._exit(0)


def main() -> None:
    """Start the orphan watch, then ``python -m llama_cpp.server`` with our arguments."""
    threading.Thread(target=_exit_when_orphaned, daemon=True).start()
    from llama_cpp.server.__main__ import main as serve

    sys.argv[0] = "llama_cpp.server"
    serve()  # type: ignore[no-untyped-call]


if __name__ == "__main__":
    main()
