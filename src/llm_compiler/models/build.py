"""Install llama.cpp's Python server built for every machine of this kind, then check it.

``python -m llm_compiler.models.build`` (what ``make install-local`` runs) does three things:

1. Picks the build flags. By default a *portable* build: on x86-64 the AVX2 level that
   every x86-64 CPU of the last decade has (AVX, AVX2, FMA, F16C, BMI2), with no
   AVX-512 and no AMX. llama.cpp's own default is ``GGML_NATIVE=ON``, which compiles
   for whatever the building CPU advertises: on a VM that advertises AMX but does not grant
   the tile state, the server then dies of a general protection fault on its first
   request. ``LLM_COMPILER_LLAMA_BUILD=native`` asks for that build anyway (measured
   speed: ``docs/performance.md``, "The embedded model's build");
   ``LLM_COMPILER_CMAKE_ARGS`` sets flags of your own.
2. Builds a wheel once per flag set into a cache of its own, keyed by the llama-cpp-python
   version, the flags, the CPU architecture and the Python tag
   (``~/.cache/llm-compiler/wheels/<key>/``; ``LLM_COMPILER_WHEEL_CACHE`` moves it), and
   installs exactly that wheel. pip's own cache is never consulted: it keeps one wheel per
   version, whatever flags built it.
3. Checks the install: starts the server on the model, completes a few tokens. When the
   server dies, it says what died and why, with the server's last lines, and rebuilds
   once with the next safer flags (custom or native, then portable, then baseline: no
   vector extension beyond SSE on x86-64) before it gives up.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

LLAMA_VERSION = "0.3.36"
PACKAGE = "llama-cpp-python"
#: Where the installed build's record lives, beside the venv's packages.
RECORD_NAME = "llm_compiler_llama_build.json"
_X86 = {"x86_64", "amd64"}
_ARM = {"aarch64", "arm64"}
_COMMON = ["-DLLAMA_CURL=OFF"]


@dataclass(frozen=True)
class Build:
    """One way to build llama.cpp: a profile name and its CMake flags."""

    profile: str
    cmake_args: tuple[str, ...]

    @property
    def key(self) -> str:
        """What tells two builds apart: version, flags, architecture, Python."""
        parts = [LLAMA_VERSION, self.profile, *self.cmake_args, _machine(), _python_tag()]
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]

    def describe(self) -> str:
        """The profile and its flags, for messages."""
        return f"{self.profile} ({' '.join(self.cmake_args)})"


def _machine() -> str:
    return platform.machine().lower()


def _python_tag() -> str:
    return f"cp{sys.version_info.major}{sys.version_info.minor}"


def profile_flags(profile: str, machine: str | None = None) -> tuple[str, ...]:
    """The CMake flags of a built-in profile (``portable``, ``baseline``, ``native``)."""
    machine = machine or _machine()
    if profile == "native":
        return ("-DGGML_NATIVE=ON", *_COMMON)
    off = ("-DGGML_NATIVE=OFF", *_COMMON)
    if machine in _X86:
        level = "ON" if profile == "portable" else "OFF"
        vector = ("AVX", "AVX2", "FMA", "F16C", "BMI2")
        return (*off, *(f"-DGGML_{name}={level}" for name in vector))
    if machine in _ARM and profile == "portable":
        # NEON and dot products: every Armv8.2+ server, Apple silicon, Raspberry Pi 5.
        return (*off, "-DGGML_CPU_ARM_ARCH=armv8.2-a+dotprod")
    return off


def builds_to_try(env: dict[str, str] | None = None) -> list[Build]:
    """The builds in the order they are tried: the asked-for one, then safer ones."""
    env = dict(os.environ if env is None else env)
    first: list[Build] = []
    if custom := env.get("LLM_COMPILER_CMAKE_ARGS", "").strip():
        first = [Build("custom", tuple(shlex.split(custom)))]
    elif (asked := env.get("LLM_COMPILER_LLAMA_BUILD", "portable")) not in ("", "portable"):
        if asked not in ("native", "baseline"):
            raise SystemExit(
                f"LLM_COMPILER_LLAMA_BUILD={asked!r}: use portable, native or baseline."
            )
        first = [Build(asked, profile_flags(asked))]
    safer = [Build(p, profile_flags(p)) for p in ("portable", "baseline")]
    return first + [b for b in safer if b not in first]


def cache_root() -> Path:
    """The wheel cache: ``LLM_COMPILER_WHEEL_CACHE``, else ``~/.cache/llm-compiler/wheels``."""
    if override := os.environ.get("LLM_COMPILER_WHEEL_CACHE"):
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "llm-compiler" / "wheels"


def cached_wheel(build: Build) -> Path | None:
    """The cached wheel of `build`, if one was built."""
    folder = cache_root() / build.key
    wheels = sorted(folder.glob("llama_cpp_python-*.whl"))
    return wheels[0] if wheels else None


def _pip(*args: str) -> list[str]:
    return [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]


def build_wheel(build: Build) -> Path:
    """Build `build`'s wheel from source (pip's cache bypassed) into the cache."""
    folder = cache_root() / build.key
    folder.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "CMAKE_ARGS": " ".join(build.cmake_args), "FORCE_CMAKE": "1"}
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
    started = time.monotonic()
    _say(f"building {PACKAGE} {LLAMA_VERSION}, {build.describe()}: about 10 minutes")
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".building-"))
    try:
        command = _pip("wheel", "-q", "--no-deps", "--no-cache-dir", "--no-binary", PACKAGE)
        subprocess.run([*command, "-w", tmp, f"{PACKAGE}=={LLAMA_VERSION}"], env=env, check=True)
        (tmp / "build.json").write_text(json.dumps(_record(build), indent=1))
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(tmp, folder)  # whole or absent: a cut build leaves no wheel behind
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _say(f"built in {time.monotonic() - started:.0f} s")
    wheel = cached_wheel(build)
    assert wheel is not None, f"pip wheel left no wheel in {folder}"
    return wheel


def _record(build: Build) -> dict[str, object]:
    return {
        "package": PACKAGE,
        "version": LLAMA_VERSION,
        "profile": build.profile,
        "cmake_args": list(build.cmake_args),
        "machine": _machine(),
        "key": build.key,
    }


def record_path() -> Path:
    """The installed build's record in this environment's site-packages."""
    import sysconfig

    return Path(sysconfig.get_paths()["purelib"]) / RECORD_NAME


def installed_build() -> dict[str, object] | None:
    """What build of llama.cpp this environment has, per its record (None: unknown)."""
    try:
        loaded: dict[str, object] = json.loads(record_path().read_text())
        return loaded
    except (OSError, ValueError):
        return None


def install(build: Build) -> None:
    """Install `build`'s wheel (building it first when it is not cached)."""
    wheel = cached_wheel(build) or build_wheel(build)
    command = _pip("install", "-q", "--no-deps", "--no-index", "--force-reinstall")
    subprocess.run([*command, str(wheel)], check=True)
    record = {**_record(build), "libraries": library_digests()}
    record_path().write_text(json.dumps(record, indent=1))


def ensure(build: Build) -> bool:
    """Install `build` unless this environment has it already; True when it installed.

    "Has it" means: the record names `build` and the installed libraries are still the
    ones that install wrote (any other install of llama-cpp-python replaces them).
    """
    record = installed_build()
    digests = library_digests()
    if record and record.get("key") == build.key and digests and record.get("libraries") == digests:
        return False
    install(build)
    return True


def library_digests() -> dict[str, str]:
    """SHA-256 of each llama.cpp library the installed ``llama_cpp`` package holds."""
    import importlib
    import importlib.util

    importlib.invalidate_caches()  # pip may have just replaced the package
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        return {}
    folder = Path(spec.origin).parent
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("lib*.so*"))
        if path.is_file() and not path.is_symlink()
    }


def check(timeout: float = 180.0) -> str | None:
    """Start the embedded server and complete a few tokens; None, or why it failed."""
    from llm_compiler.errors import LLMCompilerError
    from llm_compiler.models.server import LocalLLMServer, probe

    try:
        with LocalLLMServer(startup_timeout=timeout) as server:
            probe(server, timeout)
    except LLMCompilerError as e:
        return e.message
    return None


def rebuild_hint() -> str:
    """The command that rebuilds the embedded model's server with the portable flags."""
    return "LLM_COMPILER_LLAMA_BUILD=portable make install-local"


def _say(text: str) -> None:
    sys.stderr.write(f"install-local: {text}\n")
    sys.stderr.flush()


def run(builds: list[Build], *, verify: bool = True) -> int:
    """Install the first build that passes the check; 0 on success, 1 if none does."""
    for n, build in enumerate(builds):
        ensure(build)
        if not verify:
            _say(f"llama.cpp {build.describe()} installed, not checked (--no-check)")
            return 0
        problem = check()
        if problem is None:
            _say(f"llama.cpp {build.describe()} installed and answered")
            return 0
        _say(_failure_paragraph(build, problem, builds[n + 1 :]))
    return 1


def _failure_paragraph(build: Build, problem: str, rest: list[Build]) -> str:
    then = (
        f"Rebuilding once with the {rest[0].profile} flags ({' '.join(rest[0].cmake_args)})."
        if rest
        else f"No safer build is left; giving up. Rebuild by hand with: {rebuild_hint()}"
    )
    return (
        f"the embedded model server (llama.cpp, {build.describe()}) failed its check: "
        f"{problem}\nA server that dies of a signal (SIGILL, SIGSEGV, a general protection "
        "fault in the kernel log) was most likely built for CPU instructions this machine or "
        f"its OS does not allow. {then}"
    )


def main(argv: list[str] | None = None) -> int:
    """Command line: install (and check) llama.cpp's server for this machine."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--no-check", action="store_true", help="install without the check")
    parser.add_argument("--show", action="store_true", help="print the installed build")
    args = parser.parse_args(argv)
    if args.show:
        sys.stdout.write(json.dumps(installed_build(), indent=1) + "\n")
        return 0
    return run(builds_to_try(), verify=not args.no_check)


if __name__ == "__main__":
    sys.exit(main())
