"""The config.json schema and its files: validation, healing, scopes, atomic 0600 writes."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from lovia.exceptions import UserError
from lovia.web.config.files import ensure_gitignored, load_config, save_config
from lovia.web.config.schema import ModelProfile, WebConfig, slugify
from pydantic import ValidationError


def test_vendor_prefix_decides_the_flavour_and_fills_the_base_url() -> None:
    p = ModelProfile(model="anthropic:claude-sonnet-4-5")
    assert (p.flavor, p.model, p.base_url) == (
        "anthropic",
        "claude-sonnet-4-5",
        "https://api.anthropic.com",
    )
    bare = ModelProfile.model_validate({"model": "llama3:8b", "flavor": "openai"})
    assert (bare.flavor, bare.model) == ("openai", "llama3:8b")  # an Ollama tag, no vendor
    assert bare.base_url == "https://api.openai.com/v1"
    assert ModelProfile(model="claude-x", flavor="anthropic").flavor == "anthropic"


def test_base_url_is_normalised_and_checked() -> None:
    p = ModelProfile(model="m", base_url="  http://127.0.0.1:11434/v1/// ")
    assert p.base_url == "http://127.0.0.1:11434/v1"
    a = ModelProfile(model="m", flavor="anthropic", base_url="https://gw.example/v1/")
    assert a.base_url == "https://gw.example"
    with pytest.raises(ValidationError, match="base_url"):
        ModelProfile(model="m", base_url="ftp://x")
    with pytest.raises(ValidationError, match="base_url"):
        ModelProfile(model="m", base_url="localhost:8080")


def test_ids_are_slugs() -> None:
    assert slugify("GPT 4o (mini) — fast") == "gpt-4o-mini-fast"
    assert slugify("ünïcode") == "unicode"
    assert slugify("!!!") == "model"
    assert ModelProfile(model="My Model").id == "my-model"
    with pytest.raises(ValidationError, match="slug"):
        ModelProfile(id="Bad Id", model="m")
    with pytest.raises(ValidationError, match="slug"):
        ModelProfile(id="../etc", model="m")


def test_duplicate_ids_are_rejected() -> None:
    with pytest.raises(ValidationError, match="duplicate model id 'a'"):
        WebConfig.model_validate({"models": [{"id": "a", "model": "x"}, {"id": "a", "model": "y"}]})


def test_missing_chat_role_heals_and_unknown_references_are_rejected() -> None:
    cfg = WebConfig.model_validate(
        {"models": [{"id": "a", "model": "x"}, {"id": "b", "model": "y"}]}
    )
    assert cfg.roles.chat == "a"
    with pytest.raises(ValidationError, match="roles.vision names an unknown model id 'zz'"):
        WebConfig.model_validate({"models": [{"id": "a", "model": "x"}], "roles": {"vision": "zz"}})


def test_official_host_needs_a_key_and_local_gateways_do_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert not ModelProfile(model="gpt-4o").connection().complete
    assert ModelProfile(model="gpt-4o", api_key="sk-1").connection().complete
    local = ModelProfile(model="qwen", base_url="http://localhost:11434/v1").connection()
    assert local.complete and local.keyless_gateway
    assert not WebConfig(models=[ModelProfile(model="anthropic:claude-x")]).configured
    monkeypatch.setenv("ANTHROPIC_API_KEY", "from-env")
    assert WebConfig(models=[ModelProfile(model="anthropic:claude-x")]).configured


def test_unknown_flavour_names_the_field() -> None:
    with pytest.raises(ValidationError) as info:
        WebConfig.model_validate({"models": [{"model": "m", "flavor": "gemini"}]})
    assert info.value.errors()[0]["loc"][:3] == ("models", 0, "flavor")


def _home_and_project(tmp_path: Path) -> tuple[Path, Path]:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    return home, project


def test_no_file_is_an_empty_config_written_to_the_user_scope(tmp_path: Path) -> None:
    home, project = _home_and_project(tmp_path)
    loaded = load_config(cwd=project, home=home)
    assert not loaded.exists and loaded.scope == "user"
    assert loaded.path == home / ".lovia" / "config.json"
    assert loaded.config.models == [] and not loaded.config.configured


def test_project_file_replaces_the_user_file_wholesale(tmp_path: Path) -> None:
    home, project = _home_and_project(tmp_path)
    save_config(
        WebConfig(models=[ModelProfile(id="u", model="user-model", api_key="k")]),
        home / ".lovia" / "config.json",
    )
    save_config(WebConfig(search={"backend": "off"}), project / ".lovia" / "config.json")  # type: ignore[arg-type]
    loaded = load_config(cwd=project, home=home)
    assert loaded.scope == "project" and loaded.config.models == []
    assert loaded.config.search.backend == "off"


def test_save_is_owner_only_omits_nulls_and_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "h" / ".lovia" / "config.json"
    cfg = WebConfig(models=[ModelProfile(model="m", base_url="http://127.0.0.1:1/v1")])
    save_config(cfg, path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    data = json.loads(path.read_text())
    assert "api_key" not in data["models"][0] and "context_window" not in data["models"][0]
    assert "vision" not in data["roles"]
    assert [p.name for p in path.parent.iterdir()] == ["config.json"]  # no temp file left
    assert load_config(cwd=tmp_path, home=tmp_path / "h").config == cfg


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("{not json", "is not valid JSON (line 1"),
        ("[1, 2]", "must hold a JSON object"),
        ('{"models": [{"model": ""}]}', "models[0].model"),
        ('{"models": [{"model": "m", "context_window": -5}]}', "models[0].context_window"),
        ('{"version": 2}', "version"),
        ('{"search": {"backend": "bing"}}', "search.backend"),
    ],
)
def test_a_broken_or_invalid_file_is_a_user_error_naming_the_field(
    tmp_path: Path, text: str, needle: str
) -> None:
    (tmp_path / ".lovia").mkdir()
    (tmp_path / ".lovia" / "config.json").write_text(text)
    with pytest.raises(UserError) as info:
        load_config(cwd=tmp_path, home=tmp_path / "nohome")
    assert needle in info.value.message


def test_unknown_keys_are_ignored(tmp_path: Path) -> None:
    (tmp_path / ".lovia").mkdir()
    (tmp_path / ".lovia" / "config.json").write_text(
        json.dumps({"future": True, "models": [{"model": "m", "new_field": 1, "api_key": "k"}]})
    )
    cfg = load_config(cwd=tmp_path, home=tmp_path).config
    assert cfg.models[0].model == "m" and "future" not in cfg.dump()


def test_lovia_folder_is_git_ignored(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("node_modules")
    ensure_gitignored(tmp_path)
    ensure_gitignored(tmp_path)
    assert (tmp_path / ".gitignore").read_text() == "node_modules\n.lovia/\n"
    assert (tmp_path / ".lovia" / ".gitignore").read_text().strip().endswith("*")


def test_a_legacy_env_file_warns_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / ".lovia").mkdir()
    (tmp_path / ".lovia" / ".env").write_text("OPENAI_API_KEY=x\n")
    load_config(cwd=tmp_path, home=tmp_path / "h")
    load_config(cwd=tmp_path, home=tmp_path / "h")
    warnings = [r for r in caplog.records if "no longer read" in r.getMessage()]
    assert len(warnings) == 1


def test_a_killed_writers_temp_file_is_swept_on_the_next_save(tmp_path: Path) -> None:
    path = tmp_path / ".lovia" / "config.json"
    path.parent.mkdir()
    (path.parent / ".config-abc.tmp").write_text("half")
    save_config(WebConfig(), path)
    assert [p.name for p in path.parent.iterdir()] == ["config.json"]
