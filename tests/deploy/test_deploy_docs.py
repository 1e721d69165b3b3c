"""docs/operations.md quotes the service's refusals as the service words them."""

from __future__ import annotations

from gnau_service.common.secret_files import SecretFileProblem, refusal
from tests.deploy.manifests import REPO

OPERATIONS = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")


def test_the_quoted_refusals_are_the_services_own() -> None:
    fsgroup_mount = refusal(
        "key file", "/run/secrets/gnau/log-signing-key.pem", SecretFileProblem.SHARED,
        mode=0o440, owner_uid=0, owner_gid=10001, uid=10001,
    )  # fmt: skip
    own_file = refusal(
        "token file", "/etc/gnau/tokens.json", SecretFileProblem.SHARED,
        mode=0o640, owner_uid=10001, owner_gid=10001, uid=10001,
    )  # fmt: skip
    for message in (fsgroup_mount, own_file):
        assert f'{{"error": "{message}", "event": "cannot start"' in OPERATIONS
