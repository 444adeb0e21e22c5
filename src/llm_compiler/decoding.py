"""The constrained decoding a model server takes, below both the engine (which asks for
it) and the model launcher (which declares it for the servers it starts)."""

from __future__ import annotations

from typing import Literal

#: ``grammar``: a GBNF ``grammar`` in the request (llama.cpp's servers); ``json_schema``:
#: a JSON schema in ``response_format`` only (structured outputs); ``off``: none.
Decoding = Literal["grammar", "json_schema", "off"]
DECODINGS: tuple[Decoding, ...] = ("grammar", "json_schema", "off")
