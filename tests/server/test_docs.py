from pathlib import Path

from gnau_service.server.process.config import SETTINGS

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_every_setting_is_documented_once() -> None:
    text = DOC.read_text()
    for name, setting in SETTINGS.items():
        assert f"| `{setting.flag}` | `{setting.variable}` | `{name}` |" in text, name
