from dataclasses import dataclass

import pytest
from tidemq.common.settings import ServiceSettings, SettingsError, load_settings, setting


@dataclass
class DemoSettings(ServiceSettings):
    queues: int = setting(4, "queues per topic")
    sync_flush: bool = setting(False, "fsync before acknowledging")
    namesrv_addrs: str = setting("127.0.0.1:9876", "name servers, ';'-separated")


def test_defaults_file_env_and_flags_apply_in_order(tmp_path, monkeypatch):
    config = tmp_path / "svc.toml"
    config.write_text('queues = 8\nnamesrv_addrs = "file:1"\nsync_flush = true\n')
    monkeypatch.setenv("TIDEMQ_NAMESRV_ADDRS", "env:1")
    settings = load_settings(DemoSettings, ["--config", str(config), "--port", "7000"])
    assert settings.queues == 8           # file beats default
    assert settings.sync_flush is True
    assert settings.namesrv_addrs == "env:1"  # environment beats file
    assert settings.port == 7000          # flag beats everything
    assert settings.host == "127.0.0.1"   # default kept


def test_flag_beats_environment(monkeypatch):
    monkeypatch.setenv("TIDEMQ_QUEUES", "3")
    assert load_settings(DemoSettings, ["--queues", "5"]).queues == 5


def test_yaml_file(tmp_path):
    config = tmp_path / "svc.yaml"
    config.write_text("queues: 2\nlog-level: debug\n")
    settings = load_settings(DemoSettings, ["--config", str(config)])
    assert (settings.queues, settings.log_level) == (2, "debug")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--queues", "many"], "'many' is not a valid int"),
        (["--sync-flush", "maybe"], "'maybe' is not a valid bool"),
        (["--config", "/nonexistent.toml"], "does not exist"),
    ],
)
def test_bad_values_are_named(argv, message):
    with pytest.raises(SettingsError, match=message):
        load_settings(DemoSettings, argv)


def test_unknown_setting_in_file_is_rejected(tmp_path):
    config = tmp_path / "svc.toml"
    config.write_text("queuez = 1\n")
    with pytest.raises(SettingsError, match="unknown settings: \\['queuez'\\]"):
        load_settings(DemoSettings, ["--config", str(config)])
