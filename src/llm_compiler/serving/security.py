"""Who may drive the server: Host names, origins, content types and the bearer token.

The server runs tools on the machine it serves from, so by default it answers only
requests that name it by a loopback host (no DNS rebinding), come from its own page or a
non-browser client (no cross-origin web page), send JSON when they change state (a
``text/plain`` POST needs no CORS preflight, so it is refused outright) and, when a token
is set, carry ``Authorization: Bearer <token>``. Every relaxation is an explicit option.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from llm_compiler.errors import ConfigurationError, RequestError
from llm_compiler.serving.guard import ASGIApp, Receive, Scope, Send, reply

#: Host names that always reach this machine only.
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
#: Paths anyone may GET: the page shell, its icon and the A2A agent card (they hold no
#: data; everything the page shows comes from the API, which needs the token, and the card
#: says so: A2A clients read it before they have a token).
PUBLIC_PATHS = re.compile(r"^/(static/.*|favicon\.ico|\.well-known/agent-card\.json)?$")
#: The shortest token accepted (a guessable token is no protection).
MIN_TOKEN_CHARS = 16
_STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
_HOST = re.compile(
    r"^(?:\[(?P<v6>[0-9a-fA-F:.]+)\]|(?P<name>[A-Za-z0-9._-]+))(?::(?P<port>\d{1,5}))?$"
)


@dataclass(frozen=True)
class SecurityPolicy:
    """What the server accepts.

    Attributes:
        token: The bearer token every API request needs (None: no token asked).
        allow_origins: Origins (``scheme://host[:port]``) besides the page's own that may
            call the API from a browser.
        allow_hosts: Host names besides the loopback ones that requests may name (``*``:
            any, e.g. behind a proxy that checks them; honoured only with a token or
            `insecure`, since it lets a DNS-rebinding page reach the server).
        insecure: Serve beyond loopback, or with any host name, without a token
            (refused otherwise).
        accepted: Every token accepted, when there are several (rotation; a token file's
            set is read again on :meth:`TokenSet.reload`); `token` is then one of them.
    """

    token: str | None = field(default=None, repr=False)  # never in logs
    allow_origins: frozenset[str] = field(default_factory=frozenset)
    allow_hosts: frozenset[str] = field(default_factory=frozenset)
    insecure: bool = False
    accepted: TokenSet | None = field(default=None, repr=False)  # never in logs

    @classmethod
    def build(
        cls,
        token: str | None = None,
        allow_origins: Iterable[str] = (),
        allow_hosts: Iterable[str] = (),
        insecure: bool = False,
        tokens: Sequence[str] = (),
        token_file: str | None = None,
    ) -> SecurityPolicy:
        """A policy with origins and hosts normalized and checked; `tokens` and the
        tokens of `token_file` (one a line) are accepted besides `token`.

        Raises:
            ConfigurationError: A short token, a malformed origin, a wildcard origin, or
                ``*`` among the hosts with neither a token nor `insecure`.
        """
        accepted = None
        if tokens or token_file:
            accepted = TokenSet([*([token] if token else []), *tokens], token_file)
            token = accepted.current[0] if accepted.current else None
        elif token is not None:
            check_token(token)
        origins = frozenset(normalize_origin(o) for o in allow_origins)
        hosts = frozenset(_host_name(h) for h in allow_hosts if h.strip())
        if "*" in hosts and not token and not insecure:
            raise ConfigurationError(
                "--allow-host '*' answers any host name, so a DNS-rebinding web page could "
                "reach this server: set a token (LLM_COMPILER_TOKEN or --token), list the "
                "names with --allow-host NAME, or pass --insecure to accept the risk."
            )
        return cls(token or None, origins, hosts, insecure, accepted)

    @property
    def any_host(self) -> bool:
        """Whether any host name is answered (``*``, with a token or `insecure`)."""
        return "*" in self.allow_hosts and (self.token is not None or self.insecure)

    def host_allowed(self, name: str) -> bool:
        """Whether requests may name this server by the host `name` (lowercase, no port)."""
        return name in LOOPBACK_HOSTS or name in self.allow_hosts or self.any_host

    def token_matches(self, header: str | None) -> bool:
        """Whether an ``Authorization`` header carries the token (constant-time compare)."""
        if self.token is None:
            return True
        scheme, _, given = (header or "").partition(" ")
        if scheme.lower() != "bearer":
            return False
        tokens = self.accepted.current if self.accepted is not None else (self.token,)
        found = [hmac.compare_digest(given.strip().encode(), t.encode()) for t in tokens]
        return any(found)


def check_token(token: str) -> None:
    """ConfigurationError unless `token` is long enough to be no guess."""
    if len(token) < MIN_TOKEN_CHARS:
        raise ConfigurationError(
            f"A token is {len(token)} characters long; use at least {MIN_TOKEN_CHARS} "
            "(e.g. python -c 'import secrets; print(secrets.token_urlsafe())')."
        )


def normalize_origin(origin: str) -> str:
    """``scheme://host[:port]`` in lowercase without a default port, or ConfigurationError."""
    parts = urlsplit(origin.strip().lower())
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname or parts.path not in ("", "/"):
        raise ConfigurationError(
            f"--allow-origin takes an origin like https://app.example.com:8443, got {origin!r} "
            "(no wildcards: list each origin)."
        )
    try:
        port = parts.port
    except ValueError:
        raise ConfigurationError(f"The origin {origin!r} has an invalid port.") from None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    if port is None or port == _DEFAULT_PORTS[parts.scheme]:
        return f"{parts.scheme}://{host}"
    return f"{parts.scheme}://{host}:{port}"


def _parse_host(host: str) -> str | None:
    """The lowercase name of ``host[:port]`` (brackets off an IPv6 address), None if malformed."""
    match = _HOST.match(host.strip())
    return None if match is None else (match["v6"] or match["name"]).lower().rstrip(".")


def _host_name(host: str) -> str:
    """An ``--allow-host`` value as a name (``*`` stays), or ConfigurationError."""
    name = "*" if host.strip() == "*" else _parse_host(host)
    if name is None:
        raise ConfigurationError(f"--allow-host takes a host name or address, got {host!r}.")
    return name


class Refused(RequestError):
    """A request the security guard answers with `status` and `detail`."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(status, detail)
        #: The allowed origin the request came from, if any (its script may read the reply).
        self.cors_origin: str | None = None


class SecurityGuard:
    """ASGI middleware enforcing a :class:`SecurityPolicy` before anything else runs.

    Checks, in order: the Host header (400 missing or malformed, 421 a name not served),
    the Origin (403 unless same-origin or allowed), the token (401) and, for requests
    that change state, a JSON content type (415). CORS preflights from allowed origins
    pass without the token (browsers never send credentials on them).
    """

    def __init__(self, app: ASGIApp, policy: SecurityPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        try:
            self.check(scope)
        except Refused as e:
            await _refuse(scope, send, e)
            return
        await self.app(scope, receive, send)

    def check(self, scope: Scope) -> None:
        """Raise :class:`Refused` if the request may not reach the app."""
        headers = _headers(scope)
        host = self._check_host(headers.get("host"))
        method = scope.get("method", "GET")
        origin = headers.get("origin")
        if origin is not None:
            self._check_origin(origin, host, scope.get("scheme", "http"))
        elif headers.get("sec-fetch-site") == "cross-site" and not _public(method, scope):
            # A browser's request from another site without an Origin (an <img>, a
            # <script>): nothing another site loads may touch the API.
            raise Refused(403, "Requests from other sites are not accepted.")
        if method == "OPTIONS" and origin is not None:
            return  # a CORS preflight: the CORS middleware answers it
        try:
            self._check_request(method, scope.get("path", ""), headers)
        except Refused as e:  # a listed origin's script may read why it was refused
            e.cors_origin = origin
            raise

    def _check_request(self, method: str, path: str, headers: dict[str, str]) -> None:
        """The token, and a JSON content type for requests that change state."""
        if not _public(method, {"path": path}):
            if not self.policy.token_matches(headers.get("authorization")):
                raise Refused(401, "This server needs its token: Authorization: Bearer <token>.")
        if method in _STATE_CHANGING and not _bodiless_delete(method, headers):
            kind = headers.get("content-type", "").split(";")[0].strip().lower()
            if kind != "application/json":
                raise Refused(
                    415, f"Send {method} requests as application/json, not {kind or 'no type'}."
                )

    def _check_host(self, value: str | None) -> str:
        """The request's ``host[:port]`` (lowercase) once its name is one this server serves."""
        if not value:
            raise Refused(400, "The request has no Host header.")
        name = _parse_host(value)
        if name is None:
            raise Refused(400, f"Malformed Host header {value!r}.")
        if not self.policy.host_allowed(name):
            raise Refused(
                421,
                f"This server does not answer for host {name!r}; start it with --allow-host "
                f"{name} if that name is meant to reach it.",
            )
        return value.strip().lower()

    def _check_origin(self, origin: str, host: str, scheme: str) -> None:
        try:
            normalized = normalize_origin(origin)
        except ConfigurationError:
            raise Refused(403, f"Requests from origin {origin!r} are not accepted.") from None
        if normalized in self.policy.allow_origins or _same_origin(normalized, host, scheme):
            return
        raise Refused(
            403,
            f"Requests from origin {normalized} are not accepted; start the server with "
            f"--allow-origin {normalized} to let that site call it.",
        )


def _bodiless_delete(method: str, headers: dict[str, str]) -> bool:
    """A DELETE without a body (an MCP client ending its session): no form or text POST
    can forge one, since browsers preflight every cross-site DELETE."""
    bodiless = headers.get("content-length", "0") == "0" and "transfer-encoding" not in headers
    return method == "DELETE" and bodiless


def _public(method: str, scope: Scope) -> bool:
    """Whether the request only fetches the page shell (anyone may)."""
    return method in ("GET", "HEAD") and PUBLIC_PATHS.match(scope.get("path", "")) is not None


def _same_origin(origin: str, host: str, scheme: str) -> bool:
    """Whether `origin` names the host the request was sent to (the page's own origin).

    The scheme is not compared: behind a TLS proxy the browser says https while this
    server hears http; the host and port are what DNS rebinding or another site change.
    """
    parts = urlsplit(origin)
    port = parts.port or _DEFAULT_PORTS.get(parts.scheme, 80)
    served = urlsplit(f"{scheme}://{host}")
    try:
        served_port = served.port or _DEFAULT_PORTS.get(parts.scheme, 80)
    except ValueError:
        return False
    return parts.hostname == served.hostname and port == served_port


def _headers(scope: Scope) -> dict[str, str]:
    """The request headers, lowercase names, latin-1 values (the last of repeated ones)."""
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


async def _refuse(scope: Scope, send: Send, refused: Refused) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    extra = [(b"www-authenticate", b"Bearer")] if refused.status == 401 else []
    if refused.cors_origin is not None:
        extra += [
            (b"access-control-allow-origin", refused.cors_origin.encode()),
            (b"vary", b"Origin"),
        ]
    await reply(send, refused.status, refused.detail, extra)


def read_tokens(path: str) -> list[str]:
    """The tokens of a token file: one per line; blank lines and ``#`` comments skipped.

    Raises:
        ConfigurationError: The file cannot be read.
    """
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise ConfigurationError(f"Cannot read the token file {path}: {e}") from None
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


class TokenSet:
    """The tokens a server accepts: fixed ones, and those of a token file (one a line,
    ``#`` comments), read again by :meth:`reload` (``llm-compiler serve`` does on SIGHUP),
    so a token can be added and an old one removed without a restart."""

    def __init__(self, fixed: Sequence[str], path: str | None = None) -> None:
        self.fixed, self.path = tuple(fixed), path
        self.current: tuple[str, ...] = ()
        self.reload()

    def reload(self) -> None:
        """Read the token file again (the set in use stays if it is unreadable or empty).

        Raises:
            ConfigurationError: The file cannot be read, is empty, or holds a short token.
        """
        tokens = [*self.fixed, *(read_tokens(self.path) if self.path else [])]
        if not tokens:
            raise ConfigurationError(f"The token file {self.path} holds no token.")
        for token in tokens:
            check_token(token)
        self.current = tuple(dict.fromkeys(tokens))

    def __repr__(self) -> str:  # never the tokens themselves
        return f"TokenSet({len(self.current)} tokens, file={self.path!r})"
