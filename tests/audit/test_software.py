from pathlib import Path

from gnau_service.audit.software import package_digest, software_identity


def test_the_digest_changes_with_any_source_byte(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "sub" / "b.py").write_text("y = 2\n")
    (tmp_path / "notes.txt").write_text("not source")
    before = package_digest(tmp_path)
    assert package_digest(tmp_path) == before
    (tmp_path / "notes.txt").write_text("changed, but not source")
    assert package_digest(tmp_path) == before
    (tmp_path / "sub" / "b.py").write_text("y = 3\n")
    assert package_digest(tmp_path) != before


def test_identity_names_the_running_package() -> None:
    identity = software_identity()
    assert identity["name"] == "gnau-service"
    assert len(identity["sha256"]) == 64
