"""Issue 41 F6: the allowed root defaulted to the server's working directory, and
dot-folders and secret files were indexed (and so retrievable verbatim)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from router.audit.f6_default_root import SECRETS, write_home
from retrieval.files import FileFilter, scan
from router.config import load_config, parse_config
from router.errors import ConfigError
from specialists.base import ForbiddenError, OptionsError

REPO = Path(__file__).resolve().parents[2]
RETRIEVER = "retrieval.specialist:RetrievalSpecialist"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home-like"
    write_home(home)
    return home


def test_scan_skips_dot_folders_dot_files_and_secret_files(home: Path) -> None:
    (home / "lib" / "service_account.json").write_text('{"private_key": "x"}\n')
    (home / "keys" / "prod.key").parent.mkdir()
    (home / "keys" / "prod.key").write_text("k\n")
    found = scan(home)
    assert sorted(found.files) == ["app.py", "lib/credentials_helper.py"]
    assert found.skipped["hidden"] >= 3  # .config/, .docker/, .env (.git is "vendored")
    assert found.skipped["secret"] >= 5  # id_rsa, server.pem, the JSON credentials, prod.key


def test_include_hidden_and_secret_patterns_let_them_in(home: Path) -> None:
    hidden = scan(home, FileFilter(include_hidden=True))
    assert ".config/app/settings.yaml" in hidden.files
    assert ".docker/config.json" in hidden.files
    assert "credentials.json" not in hidden.files  # still named like a secret
    assert not any(p.startswith(".git/") for p in hidden.files)  # still vendored
    everything = scan(home, FileFilter(include_hidden=True, secret_patterns=[]))
    assert {"credentials.json", "deploy/gcp-service-account.json",
            ".config/gcloud/application_default_credentials.json"} <= set(everything.files)
    custom = scan(home, FileFilter(secret_patterns=["app.*"]))
    assert "app.py" not in custom.files and "credentials.json" in custom.files


def test_the_retriever_indexes_no_secret_by_default_and_what_its_options_say(
        home: Path, tmp_path: Path) -> None:
    from retrieval.specialist import RetrievalSpecialist

    def indexed(**options: object) -> set[str]:
        spec = RetrievalSpecialist(allowed_root=str(home.parent), embedder="hash:64",
                                   index_dir=str(tmp_path / f"ix-{len(options)}"), **options)
        spec.setup()
        spec.wait_ready(60)
        spec.index_repo(str(home))
        out = spec.retrieve("client_secret private_key auth token", k=100, repo=str(home),
                            mode="bm25")
        return {h["path"] for h in out["results"]}

    assert indexed() == {"app.py", "lib/credentials_helper.py"}
    assert ".env" not in indexed(include_hidden=True)  # no extension: not a source file
    assert ".docker/config.json" in indexed(include_hidden=True)
    assert "credentials.json" in indexed(include_hidden=True, secret_patterns=[])


def test_a_path_through_a_dot_folder_is_refused_unless_hidden_is_included(
        home: Path, tmp_path: Path) -> None:
    from retrieval.specialist import RetrievalSpecialist

    spec = RetrievalSpecialist(allowed_root=str(home), index_dir=str(tmp_path / "ix"),
                               embedder="hash:64")
    for path in (".config", ".config/gcloud", str(home / ".docker")):
        with pytest.raises(ForbiddenError, match="hidden folder.*include_hidden"):
            spec.check_path(path)
    assert spec.check_path("lib") == (home / "lib").resolve()
    spec = RetrievalSpecialist(allowed_root=str(home), index_dir=str(tmp_path / "ix"),
                               embedder="hash:64", include_hidden=True)
    assert spec.check_path(".config") == (home / ".config").resolve()


def test_an_index_from_before_the_fix_is_dropped_not_searched(home: Path,
                                                                tmp_path: Path) -> None:
    """An index written before (format 2) may hold secret files: it is rebuilt."""
    from retrieval.index import Index, IndexConfig

    index = Index(tmp_path / "ix", IndexConfig(embedder="hash:64", include_hidden=True,
                                               secret_patterns=[]))
    index.refresh(home)
    assert any(c.path == ".docker/config.json" for c in index.chunks)
    gen = tmp_path / "ix" / (tmp_path / "ix" / "CURRENT").read_text().strip()
    meta = json.loads((gen / "meta.json").read_text())
    meta["format_version"] = 2
    (gen / "meta.json").write_text(json.dumps(meta))
    reopened = Index.open(tmp_path / "ix", IndexConfig(embedder="hash:64"))
    assert reopened.chunks == [] and "format version 2" in (reopened.notice or "")


# -- the default root ---------------------------------------------------------------------
def test_the_default_config_allows_no_root_until_complement_repos_is_set(
        tmp_path: Path) -> None:
    config = load_config(REPO / "configs" / "default.yaml", env={})
    assert config.workspace.roots() == []
    assert not config.specialists["retrieval"].options["allowed_root"]
    assert config.specialists["retrieval"].options["include_hidden"] is False
    config = load_config(REPO / "configs" / "default.yaml",
                         env={"COMPLEMENT_REPOS": str(tmp_path)})
    assert config.workspace.roots() == [tmp_path]
    assert config.specialists["retrieval"].options["allowed_root"] == str(tmp_path)


def test_without_a_root_indexing_says_what_to_set(tmp_path: Path, home: Path) -> None:
    from retrieval.specialist import RetrievalSpecialist
    from specialists.paths import resolve_repo

    spec = RetrievalSpecialist(allowed_root="", index_dir=str(tmp_path / "ix"),
                               embedder="hash:64")
    with pytest.raises(ForbiddenError, match="COMPLEMENT_REPOS"):
        spec.index_repo(".")
    with pytest.raises(ForbiddenError, match="COMPLEMENT_REPOS"):  # /v1/edit's repo
        resolve_repo(str(home), [])


def _roots_to_refuse() -> list[str]:
    home = Path.home()
    return ["/", "~", str(home), str(home) + "/", str(home.parent)]


@pytest.mark.parametrize("root", _roots_to_refuse())
def test_home_and_the_file_system_root_are_refused_at_load(root: str) -> None:
    with pytest.raises(ConfigError, match=r"workspace\.allowed_roots.*COMPLEMENT_REPOS"):
        parse_config({"workspace": {"allowed_roots": [root]}}, env={})
    with pytest.raises(ConfigError, match=r"specialists\.r\.options\.allowed_root: .*"
                                          r"COMPLEMENT_REPOS"):
        parse_config({"specialists": {"r": {"class": RETRIEVER,
                                            "options": {"allowed_root": root}}}}, env={})
    with pytest.raises(ConfigError, match="COMPLEMENT_REPOS"):
        load_config(REPO / "configs" / "default.yaml", env={"COMPLEMENT_REPOS": root})
    from retrieval.specialist import RetrievalSpecialist

    with pytest.raises(OptionsError, match="folder your repositories live under"):
        RetrievalSpecialist(allowed_root=root, embedder="hash:64")


def test_a_folder_holding_the_home_directory_is_refused(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from specialists.paths import unsafe_root

    (tmp_path / "users" / "me").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(tmp_path / "users" / "me"))
    assert "a folder holding the home directory" in (unsafe_root(tmp_path / "users") or "")
    assert "is the home directory" in (unsafe_root("~") or "")
    assert unsafe_root(tmp_path / "users" / "me" / "code") is None  # inside home is fine
    assert unsafe_root(tmp_path / "elsewhere") is None


def test_the_readme_serves_with_complement_repos_set() -> None:
    readme = (REPO / "README.md").read_text()
    assert "COMPLEMENT_REPOS=$PWD .venv/bin/complement serve" in readme
    assert "COMPLEMENT_REPOS=str(REPO)" in (REPO / "tests" / "test_readme.py").read_text()


def test_probe_default_root(tmp_path: Path) -> None:
    from router.audit.f6_default_root import probe

    tally = probe(tmp_path)
    assert tally.ok, tally.as_dict()
    assert tally.attempts >= 40, tally.as_dict()
    assert len(SECRETS) >= 6
