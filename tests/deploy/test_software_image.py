"""The image authenticates its software (docs/software.md): its build writes a signed manifest
as its last step and checks it, and its service is configured with that manifest. Read from
deploy/Dockerfile; tests/containers builds and runs it for real (make test-deploy)."""

from __future__ import annotations

from tests.deploy.test_docker import instructions


def test_the_build_signs_a_manifest_after_the_last_install_and_checks_it() -> None:
    runs = [" ".join(arguments) for arguments in instructions("RUN")]
    (signing,) = [run for run in runs if "gnau software manifest" in run]
    installing = max(at for at, run in enumerate(runs) if "pip" in run)
    assert runs.index(signing) > installing, "the manifest lists the venv as it ships"
    (env,) = instructions("ENV")
    values = dict(item.split("=", 1) for item in env if "=" in item)
    manifest, key = values["GNAU_SOFTWARE_MANIFEST"], values["GNAU_RELEASE_KEY"]
    assert f"--output {manifest}" in signing
    assert f"> {key}" in signing, "the build's verifier key, beside the manifest"
    assert f"gnau software verify --manifest {manifest} --release-key {key}" in signing
    # The build's private key leaves the image in the step that made it.
    assert "rm /tmp/release.pem" in signing
