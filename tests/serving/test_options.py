"""``llm-compiler serve`` settings: flag > environment > configuration file > default; tokens
from the environment or a file, several at once, re-read without a restart."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from llm_compiler import ConfigurationError
from llm_compiler.cli import SERVE_SETTINGS, main, parse, parser, security_policy

TOKEN, OTHER, NEWER = "a" * 24, "b" * 24, "c" * 24
ROOT = Path(__file__).parents[2]


def test_every_serve_option_has_a_setting_and_an_environment_variable():
    serve = parser()._subparsers._group_actions[0].choices["serve"]  # type: ignore[union-attr]
    dests = {a.dest for a in serve._actions} - {"help", "config"}
    settings = {s.dest: s.variable for s in SERVE_SETTINGS}
    assert dests <= set(settings), dests - set(settings)
    assert settings["store"] == "LLM_COMPILER_STORE" and settings["port"] == "LLM_COMPILER_PORT"


def test_flag_beats_environment_beats_file_beats_default(tmp_path):
    config = tmp_path / "serve.toml"
    config.write_text(
        'host = "10.0.0.9"\nport = 9100\nmax-runs = 4\nallow-host = ["a.lan", "b.lan"]\n'
        'store = "postgresql://llmc:filepass@db/runs"\naccess-log = true\n'
    )
    env = {"LLM_COMPILER_CONFIG": str(config), "LLM_COMPILER_PORT": "9200"}
    args = parse(["serve", "--max-runs", "2"], env)
    assert (args.host, args.port, args.max_runs) == ("10.0.0.9", 9200, 2)
    assert args.allow_host == ["a.lan", "b.lan"] and args.access_log is True
    assert args.store == "postgresql://llmc:filepass@db/runs"
    env["LLM_COMPILER_ALLOW_HOST"] = "c.lan, d.lan"
    assert parse(["serve"], env).allow_host == ["c.lan", "d.lan"]
    assert parse(["serve", "--allow-host", "e.lan"], env).allow_host == ["e.lan"]
    assert parse(["serve", "--no-access-log", "--config", str(config)], {}).access_log is False
    defaults = parse(["serve"], {})
    assert (defaults.port, defaults.store, defaults.idle_release, defaults.log_format) == (
        8000,
        "memory",
        30.0,
        "text",
    )


def test_a_serve_table_and_dashed_or_underscored_keys_read_alike(tmp_path):
    config = tmp_path / "serve.toml"
    config.write_text('[serve]\nmax_runs = 3\noutage-limit = 9.5\nlog-format = "json"\n')
    args = parse(["serve", "--config", str(config)], {})
    assert (args.max_runs, args.outage_limit, args.log_format) == (3, 9.5, "json")


@pytest.mark.parametrize(
    "text",
    [
        'store = "sqlite:///x.db"\nmax-runs = 3\n',
        '[serve]\nstore = "sqlite:///x.db"\nmax-runs = 3\n',
        'store = "sqlite:///x.db"\n[serve]\nmax-runs = 3\n',
        'max-runs = 3\n[serve]\nstore = "sqlite:///x.db"\n',
    ],
    ids=["top-level", "serve-table", "top-then-table", "table-after-top"],
)
def test_both_layouts_are_read_whole(tmp_path, text):
    """Keys at the top and in a [serve] table are all read: none is dropped."""
    config = tmp_path / "serve.toml"
    config.write_text(text)
    args = parse(["serve", "--config", str(config)], {})
    assert (args.store, args.max_runs) == ("sqlite:///x.db", 3)
    assert args.origins["store"] == str(config) and args.origins["port"] == "default"


def test_the_file_make_secrets_writes_keeps_its_store_below_a_serve_table(tmp_path):
    """deploy/make-secrets.sh writes the store at the top; settings added under [serve]
    below it leave the store where it was."""
    shutil.copytree(ROOT / "deploy", tmp_path / "deploy")
    subprocess.run(["sh", str(tmp_path / "deploy" / "make-secrets.sh")], check=True)
    config = tmp_path / "secrets" / "llmc.toml"
    written = config.read_text()
    assert written.startswith('store = "postgresql://llmc:')
    with config.open("a") as f:
        f.write("[serve]\nmax-runs = 8\n")
    args = parse(["serve"], {"LLM_COMPILER_CONFIG": str(config)})
    assert args.store == written.split('"')[1] and args.max_runs == 8


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            'store = "memory"\n[server]\nport = 9\n',
            r"table \[server\] hides its keys.*under \[serve\]",
        ),
        ("[serve.limits]\nmax-runs = 2\n", r"table \[serve.limits\] hides its keys"),
        ("max-runs = 2\n[serve]\nmax_runs = 3\n", "max-runs is set twice; keep one"),
        ("serve = 1\n", r"must be the \[serve\] table"),
        ("stor = 'x'\n", "unknown setting stor .did you mean store"),
    ],
)
def test_a_file_that_would_hide_or_repeat_a_key_is_an_error(tmp_path, text, message):
    config = tmp_path / "serve.toml"
    config.write_text(text)
    with pytest.raises(ConfigurationError, match=message):
        parse(["serve", "--config", str(config)], {})
    with pytest.raises(ConfigurationError, match=message):  # the store commands read it too
        parse(["store", "migrate", "--config", str(config)], {})


def test_the_store_commands_take_the_store_as_serve_does(tmp_path):
    config = tmp_path / "serve.toml"
    config.write_text('[serve]\nstore = "sqlite:///file.db"\nmax-runs = 2\n')
    env = {"LLM_COMPILER_CONFIG": str(config)}
    assert parse(["store", "migrate"], env).store == "sqlite:///file.db"
    env["LLM_COMPILER_STORE"] = "sqlite:///env.db"
    prune = parse(["store", "prune", "--older-than", "7d"], env)
    assert prune.store == "sqlite:///env.db" and prune.origins["store"] == "LLM_COMPILER_STORE"
    flag = parse(["store", "migrate", "--store", "sqlite:///flag.db"], env)
    assert flag.store == "sqlite:///flag.db"
    with pytest.raises(ConfigurationError, match="store migrate needs a durable store"):
        parse(["store", "migrate"], {})


def test_a_store_command_without_a_store_is_a_one_line_error(capsys, monkeypatch):
    monkeypatch.delenv("LLM_COMPILER_STORE", raising=False)
    monkeypatch.delenv("LLM_COMPILER_CONFIG", raising=False)
    assert main(["store", "prune", "--older-than", "7d"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "LLM_COMPILER_STORE" in err, err


@pytest.mark.parametrize(
    ("env", "file", "message"),
    [
        ({"LLM_COMPILER_PORT": "eighty"}, "", "LLM_COMPILER_PORT: expected a port"),
        ({"LLM_COMPILER_MAX_RUNS": "0"}, "", "LLM_COMPILER_MAX_RUNS: expected a whole number"),
        ({"LLM_COMPILER_INSECURE": "maybe"}, "", "LLM_COMPILER_INSECURE: expected true or false"),
        ({"LLM_COMPILER_LOG_LEVEL": "loud"}, "", "expected one of debug"),
        ({}, "prot = 80\n", "unknown setting prot .did you mean port"),
        ({}, "port = [1]\n", "port: expected one value"),
        ({}, "insecure = 'yes'\n", "insecure: expected true or false"),
        ({}, "port = \n", "is not TOML"),
    ],
)
def test_bad_settings_name_where_they_came_from(tmp_path, env, file, message):
    config = tmp_path / "serve.toml"
    config.write_text(file)
    with pytest.raises(ConfigurationError, match=message):
        parse(["serve", "--config", str(config)], env)


def test_a_bad_setting_is_a_one_line_error(capsys, monkeypatch):
    monkeypatch.setenv("LLM_COMPILER_PORT", "eighty")
    assert main(["serve"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: LLM_COMPILER_PORT") and len(err.strip().splitlines()) == 1


def test_several_tokens_are_accepted_and_a_token_file_is_read_again(tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text(f"# current and next\n{TOKEN}\n\n{OTHER}\n")
    env = {"LLM_COMPILER_TOKEN_FILE": str(tokens), "LLM_COMPILER_TOKENS": NEWER}
    policy = security_policy(parse(["serve"], env))
    assert policy.token is not None
    for token in (TOKEN, OTHER, NEWER):
        assert policy.token_matches(f"Bearer {token}")
    assert not policy.token_matches("Bearer " + "d" * 24)
    tokens.write_text(f"{OTHER}\n")  # TOKEN retired
    assert policy.accepted is not None
    policy.accepted.reload()
    assert not policy.token_matches(f"Bearer {TOKEN}")
    assert policy.token_matches(f"Bearer {OTHER}") and policy.token_matches(f"Bearer {NEWER}")
    assert TOKEN not in repr(policy) and OTHER not in repr(policy)
    tokens.write_text("short\n")
    with pytest.raises(ConfigurationError, match="at least 16"):
        policy.accepted.reload()
    assert policy.token_matches(f"Bearer {OTHER}")  # a bad file keeps the set in use


def test_a_missing_or_empty_token_file_is_an_error(tmp_path):
    with pytest.raises(ConfigurationError, match="Cannot read the token file"):
        security_policy(parse(["serve", "--token-file", str(tmp_path / "none")], {}))
    (tmp_path / "empty").write_text("# nothing yet\n")
    with pytest.raises(ConfigurationError, match="holds no token"):
        security_policy(parse(["serve", "--token-file", str(tmp_path / "empty")], {}))


def test_the_operations_page_lists_every_setting():
    from pathlib import Path

    page = (Path(__file__).parents[2] / "docs" / "operations.md").read_text()
    for setting in SERVE_SETTINGS:
        assert f"`{setting.variable}`" in page, setting.variable
        if setting.dest != "tokens":
            assert f"`--{setting.key}" in page, setting.key
