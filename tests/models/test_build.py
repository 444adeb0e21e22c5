"""The embedded model's llama.cpp build: portable flags, a flag-keyed cache, a checked install."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from llm_compiler.models import build

AMX = ("ldtilecfg", "tileloadd", "tilestored", "tdpb", "tilerelease", "tilezero")


@pytest.mark.parametrize("machine", ["x86_64", "aarch64", "riscv64"])
def test_portable_builds_never_compile_for_the_building_cpu(machine):
    flags = build.profile_flags("portable", machine)
    assert "-DGGML_NATIVE=OFF" in flags
    assert not any("AVX512" in f or "AMX" in f for f in flags)


def test_x86_portable_is_avx2_and_baseline_has_no_avx():
    portable = build.profile_flags("portable", "x86_64")
    assert {"-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON"} <= set(portable)
    baseline = build.profile_flags("baseline", "x86_64")
    assert {"-DGGML_AVX=OFF", "-DGGML_AVX2=OFF"} <= set(baseline)


def test_each_flag_set_has_its_own_cache_key():
    keys = {b.key for b in build.builds_to_try({"LLM_COMPILER_LLAMA_BUILD": "native"})}
    assert len(keys) == 3
    custom = build.builds_to_try({"LLM_COMPILER_CMAKE_ARGS": "-DGGML_NATIVE=OFF -DX=1"})
    assert custom[0].profile == "custom"
    assert custom[0].cmake_args == ("-DGGML_NATIVE=OFF", "-DX=1")
    assert custom[0].key not in keys


def test_the_order_is_the_asked_build_then_safer_ones():
    assert [b.profile for b in build.builds_to_try({})] == ["portable", "baseline"]
    native = build.builds_to_try({"LLM_COMPILER_LLAMA_BUILD": "native"})
    assert [b.profile for b in native] == ["native", "portable", "baseline"]
    with pytest.raises(SystemExit, match="portable, native or baseline"):
        build.builds_to_try({"LLM_COMPILER_LLAMA_BUILD": "fastest"})


def test_the_cache_holds_one_folder_per_key(tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_COMPILER_WHEEL_CACHE", str(tmp_path))
    portable, baseline = build.builds_to_try({})
    wheel = tmp_path / portable.key / "llama_cpp_python-0.3.36-cp311-cp311-linux_x86_64.whl"
    wheel.parent.mkdir()
    wheel.touch()
    assert build.cached_wheel(portable) == wheel
    assert build.cached_wheel(baseline) is None


def test_a_build_whose_server_dies_is_replaced_by_the_next_safer_one(monkeypatch, capsys):
    installed, problems = [], ["killed by signal SIGSEGV (11)", None]
    monkeypatch.setattr(build, "ensure", lambda b: installed.append(b.profile) or True)
    monkeypatch.setattr(build, "check", lambda: problems.pop(0))
    builds = build.builds_to_try({"LLM_COMPILER_LLAMA_BUILD": "native"})
    assert build.run(builds) == 0
    assert installed == ["native", "portable"]
    err = capsys.readouterr().err
    assert "failed its check: killed by signal SIGSEGV (11)" in err
    assert "Rebuilding once with the portable flags" in err


def test_it_gives_up_with_the_rebuild_command(monkeypatch, capsys):
    monkeypatch.setattr(build, "ensure", lambda b: True)
    monkeypatch.setattr(build, "check", lambda: "exited with code 1")
    assert build.run(build.builds_to_try({})[1:]) == 1
    assert "LLM_COMPILER_LLAMA_BUILD=portable make install-local" in capsys.readouterr().err


def _ggml_cpu_libraries() -> list[Path]:
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        pytest.skip("llama-cpp-python is not installed (make install-local)")
    return sorted(Path(spec.origin).parent.rglob("libggml-cpu*.so*"))


@pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump (binutils) is missing")
def test_the_installed_build_has_no_amx_instruction():
    libraries = _ggml_cpu_libraries()
    assert libraries, "no libggml-cpu in the installed llama_cpp package"
    record = build.installed_build()
    if record is None or record["profile"] not in ("portable", "baseline"):
        pytest.skip(f"this environment asked for another build: {record}")
    for library in libraries:
        listing = subprocess.run(
            ["objdump", "-d", "--no-show-raw-insn", str(library)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        found = [line for line in listing.splitlines() if any(f"\t{op}" in line for op in AMX)]
        assert not found, f"{library.name}: {len(found)} AMX instructions, e.g. {found[:3]}"
        if record["profile"] == "portable" and build._machine() in ("x86_64", "amd64"):
            assert "vfmadd" in listing  # the AVX2/FMA kernels are there
            assert "zmm" not in listing  # and no AVX-512


def test_pips_own_cache_is_never_consulted(tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_COMPILER_WHEEL_CACHE", str(tmp_path))
    monkeypatch.setattr(build, "record_path", lambda: tmp_path / "record.json")
    commands, envs = [], []

    def run(command, env=None, check=False):
        commands.append(command)
        envs.append(env)
        if command[4] == "wheel":  # pip wheel ... -w DIR: leave a wheel there
            out = Path(command[command.index("-w") + 1])
            (out / "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl").touch()

    monkeypatch.setattr(build.subprocess, "run", run)
    portable = build.builds_to_try({})[0]
    build.install(portable)
    wheel_cmd, install_cmd = commands
    assert {"--no-cache-dir", "--no-binary", "--no-deps"} <= set(wheel_cmd)
    assert envs[0]["CMAKE_ARGS"] == " ".join(portable.cmake_args)
    assert {"--no-index", "--force-reinstall", "--no-deps"} <= set(install_cmd)
    assert install_cmd[-1] == str(build.cached_wheel(portable))
    assert build.installed_build()["key"] == portable.key
    commands.clear()
    build.install(portable)  # cached now: installed without a build
    assert [c[4] for c in commands] == ["install"]


def test_another_install_of_llama_cpp_is_replaced(tmp_path, monkeypatch):
    portable = build.builds_to_try({})[0]
    monkeypatch.setattr(build, "record_path", lambda: tmp_path / "record.json")
    libraries = {"lib/libggml-cpu.so": "aaaa"}
    monkeypatch.setattr(build, "library_digests", lambda: dict(libraries))
    installed = []

    def install(b):
        installed.append(b.profile)
        build.record_path().write_text(
            json.dumps({**build._record(b), "libraries": build.library_digests()})
        )

    monkeypatch.setattr(build, "install", install)
    assert build.ensure(portable) and installed == ["portable"]
    assert not build.ensure(portable)  # the record and the libraries agree
    libraries["lib/libggml-cpu.so"] = "bbbb"  # e.g. pip installed its own cached build
    assert build.ensure(portable) and installed == ["portable", "portable"]
