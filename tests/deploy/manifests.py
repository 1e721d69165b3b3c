"""Reading the deployment files of deploy/ for their tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
KUBERNETES_MANIFEST = DEPLOY / "kubernetes" / "gnau-dealer.yaml"
COMPOSE_FILE = DEPLOY / "compose.yaml"


def yaml_documents(path: Path) -> list[dict[str, Any]]:
    return [document for document in yaml.safe_load_all(path.read_text(encoding="utf-8"))]


def port_of(address: str) -> int:
    """The port of ``host:port``."""
    return int(address.rsplit(":", 1)[1])
