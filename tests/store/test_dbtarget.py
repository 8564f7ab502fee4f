"""store.dbtarget: a path or a PostgreSQL URL, and a password never shown."""

from pathlib import Path

import pytest

from softrt.errors import ConfigError
from softrt.store.dbtarget import local_db_path, redact, resolve, scrub

URL = "postgresql://rig7:pa%3Ass@w0rd@lab-db:5433/softrt?sslmode=require&password=other-SECRET"


def test_redact_hides_every_password_and_keeps_the_rest():
    shown = redact(URL)
    assert shown == "postgresql://rig7:***@lab-db:5433/softrt?sslmode=require&password=***"
    assert redact("postgresql://rig7@lab-db/softrt") == "postgresql://rig7@lab-db/softrt"
    assert redact("postgres://lab-db:5432/softrt") == "postgres://lab-db:5432/softrt"


def test_scrub_removes_the_password_from_a_server_message_even_decoded():
    message = f'connection to {URL} failed:\n FATAL: user "rig7" pa:ss@w0rd other-SECRET pa%3Ass@w0rd'
    out = scrub(message, URL)
    assert "pa:ss" not in out and "pa%3Ass" not in out and "SECRET" not in out and "w0rd" not in out
    assert "\n" not in out and 'user "rig7"' in out


def test_resolve_tells_files_from_urls(monkeypatch, tmp_path, softrt_home):
    assert resolve(None) == softrt_home / "history.sqlite" == local_db_path()
    assert resolve(str(tmp_path / "h.sqlite")) == tmp_path / "h.sqlite"
    assert resolve(f"sqlite://{tmp_path}/x.sqlite") == tmp_path / "x.sqlite"
    assert resolve("postgresql://rig@lab/softrt") == "postgresql://rig@lab/softrt"
    monkeypatch.setenv("SOFTRT_DB", "postgres://rig@lab/softrt")
    assert resolve(None) == "postgres://rig@lab/softrt" and local_db_path() == softrt_home / "history.sqlite"
    monkeypatch.setenv("SOFTRT_DB", str(tmp_path / "mine.sqlite"))
    assert resolve(None) == local_db_path() == tmp_path / "mine.sqlite"
    with pytest.raises(ConfigError, match=r"unknown history database mysql://u:\*\*\*@h/d") as err:
        resolve("mysql://u:SECRET@h/d")
    assert "SECRET" not in str(err.value)
    assert isinstance(resolve(Path("rel.sqlite")), Path)
