"""TLS, mutual TLS identities as roles, and where settings come from."""

from __future__ import annotations

import datetime
import uuid
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from gnau.v1 import dealer_pb2, dealer_pb2_grpc

from gnau_service.server.grpc.auth import AuthConfigError, Caller, Role
from gnau_service.server.process.app import running
from gnau_service.server.process.config import ConfigError, Settings, load_settings
from gnau_service.server.process.tokens import read_token_file
from tests.server.conftest import write_tokens


def _certificate(
    name: str,
    issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None,
    *,
    ca: bool = False,
    dns_names: tuple[str, ...] = ("localhost",),
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    issuer_name, issuer_key = issuer if issuer else (subject, key)
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(n) for n in dns_names]), critical=False
        )
    return builder.sign(issuer_key, hashes.SHA256()), key


def _pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def localhost_tls_files(directory: Path) -> tuple[str, ...]:
    """A test CA (``directory/ca.pem``) and a server certificate for ``localhost`` it signed;
    the ``gnau serve`` options that serve with it."""
    write_tls_files(directory, ("localhost",), ca="ca.pem", cert="server.pem", key="server.key")
    return ("--tls-cert", str(directory / "server.pem"), "--tls-key", str(directory / "server.key"))


def write_tls_files(
    directory: Path,
    dns_names: tuple[str, ...],
    *,
    ca: str = "ca.crt",
    cert: str = "tls.crt",
    key: str = "tls.key",
) -> None:
    """A test CA and a server certificate it signed for ``dns_names``, with its key, in
    ``directory`` (by default under the names cert-manager gives them in a Secret)."""
    authority, authority_key = _certificate("gnau test CA", None, ca=True)
    server, server_key = _certificate(
        dns_names[0], (authority.subject, authority_key), dns_names=dns_names
    )
    (directory / ca).write_bytes(_pem(authority))
    (directory / cert).write_bytes(_pem(server))
    (directory / key).write_bytes(_key_pem(server_key))


async def test_mutual_tls_identities_map_to_roles(tmp_path: Path) -> None:
    ca, ca_key = _certificate("gnau test CA", None, ca=True)
    server, server_key = _certificate("localhost", (ca.subject, ca_key))
    client, client_key = _certificate("audit-bot", (ca.subject, ca_key))
    for name, data in {
        "ca.pem": _pem(ca),
        "server.pem": _pem(server),
        "server.key": _key_pem(server_key),
    }.items():
        (tmp_path / name).write_bytes(data)
    settings = Settings(
        listen="127.0.0.1:0",
        data_dir=tmp_path / "data",
        tokens=write_tokens(tmp_path / "tokens.json"),
        tls_cert=tmp_path / "server.pem",
        tls_key=tmp_path / "server.key",
        tls_client_ca=tmp_path / "ca.pem",
        mtls_roles={"audit-bot": Caller(Role.AUDITOR, "cert:audit-bot", None)},
    )
    async with running(settings) as app:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=_pem(ca),
            private_key=_key_pem(client_key),
            certificate_chain=_pem(client),
        )
        options = (("grpc.ssl_target_name_override", "localhost"),)
        async with grpc.aio.secure_channel(
            f"127.0.0.1:{app.port}", credentials, options
        ) as channel:
            dealer = dealer_pb2_grpc.DealerServiceStub(channel)
            # The certificate's common name is an auditor: reads pass, mutations do not.
            await dealer.ListRounds(dealer_pb2.ListRoundsRequest(table_id="t"))
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await dealer.Shuffle(
                    dealer_pb2.ShuffleRequest(request_id=str(uuid.uuid4()), table_id="t")
                )
            assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
        # Without a client certificate the TLS handshake itself is refused.
        anonymous = grpc.ssl_channel_credentials(root_certificates=_pem(ca))
        async with grpc.aio.secure_channel(f"127.0.0.1:{app.port}", anonymous, options) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await dealer_pb2_grpc.DealerServiceStub(channel).ListRounds(
                    dealer_pb2.ListRoundsRequest(table_id="t"), timeout=5
                )
            assert failed.value.code() == grpc.StatusCode.UNAVAILABLE


def test_flags_beat_environment_beat_file_beat_defaults(tmp_path: Path) -> None:
    config = tmp_path / "gnau.toml"
    config.write_text('listen = "0.0.0.0:1"\norigin = "gnau-dealer/file"\nmax_stake = 500\n')
    settings = load_settings(
        config,
        {"GNAU_ORIGIN": "gnau-dealer/env", "GNAU_REFLECTION": "false"},
        {"listen": "127.0.0.1:2"},
    )
    assert settings.listen == "127.0.0.1:2"
    assert settings.origin == "gnau-dealer/env"
    assert settings.max_stake == 500
    assert settings.reflection is False
    assert settings.grace_seconds == Settings().grace_seconds
    assert settings.database_url == "sqlite:///gnau-data/gnau.db"


@pytest.mark.parametrize(
    ("file_text", "environ", "flags", "message"),
    [
        ("colour = 1\n", {}, {}, "unknown setting(s) ['colour']"),
        ("listen = \n", {}, {}, "config file"),
        ("", {"GNAU_MAX_STAKE": "lots"}, {}, "environment variable GNAU_MAX_STAKE"),
        ("", {"GNAU_REFLECTION": "maybe"}, {}, "must be true or false"),
        ("", {}, {"tls_cert": "cert.pem"}, "--tls-cert and --tls-key go together"),
        ("", {}, {"tls_client_ca": "ca.pem"}, "mTLS) needs --tls-cert"),
        ("", {}, {"mtls_roles": ["bot"]}, "expected CN=ROLE"),
        ("", {}, {"log_format": "xml"}, "json or console"),
    ],
)
def test_bad_settings_are_refused_by_name(
    tmp_path: Path, file_text: str, environ: dict[str, str], flags: dict[str, object], message: str
) -> None:
    config = tmp_path / "gnau.toml"
    config.write_text(file_text)
    with pytest.raises(ConfigError) as refused:
        load_settings(config, environ, flags)
    assert message in str(refused.value)


@pytest.mark.parametrize(
    ("file_text", "environ", "flags", "message"),
    [
        (
            "",
            {"GNAU_MAX_STAKE": "abc"},
            {},
            "setting 'max_stake' (from environment variable GNAU_MAX_STAKE): must be a whole "
            "number, not 'abc'",
        ),
        (
            "",
            {},
            {"max_stake": "abc"},
            "setting 'max_stake' (from flag --max-stake): must be a whole number, not 'abc'",
        ),
        (
            "max_stake = 1.5\n",
            {},
            {},
            "setting 'max_stake' (from key 'max_stake' of config file {config}): must be a whole "
            "number, not 1.5",
        ),
        (
            'grace_seconds = "soon"\n',
            {},
            {},
            "setting 'grace_seconds' (from key 'grace_seconds' of config file {config}): must be "
            "a number, not 'soon'",
        ),
        (
            "",
            {"GNAU_KEEPALIVE_SECONDS": "nan"},
            {},
            "setting 'keepalive_seconds' (from environment variable GNAU_KEEPALIVE_SECONDS): "
            "must be a number, not 'nan'",
        ),
        (
            "key = 5\n",
            {},
            {},
            "setting 'key' (from key 'key' of config file {config}): must be a path (a string), "
            "not 5",
        ),
        (
            "listen = 50051\n",
            {},
            {},
            "setting 'listen' (from key 'listen' of config file {config}): must be a string, "
            "not 50051",
        ),
        (
            "",
            {"GNAU_MTLS_ROLES": "bot=admin"},
            {},
            "setting 'mtls_roles' (from environment variable GNAU_MTLS_ROLES): unknown role "
            "'admin' in 'bot=admin': expected one of public, auditor, operator",
        ),
        (
            "",
            {"GNAU_MAX_STAKE": "9007199254740991"},
            {},
            "setting 'max_stake' (from environment variable GNAU_MAX_STAKE) is 9007199254740991",
        ),
        (
            "workers = 1.5\n",
            {},
            {},
            "setting 'workers' (from key 'workers' of config file {config}): must be auto or a "
            "whole number from 1 to 64, not 1.5",
        ),
        (
            "",
            {"GNAU_WORKERS": "65"},
            {},
            "setting 'workers' (from environment variable GNAU_WORKERS): must be auto or a whole "
            "number from 1 to 64, not '65'",
        ),
    ],
)
def test_a_refused_setting_names_its_source_and_what_is_expected(
    tmp_path: Path, file_text: str, environ: dict[str, str], flags: dict[str, object], message: str
) -> None:
    """A regression: GNAU_MAX_STAKE=abc was reported as --max-stake with int()'s message."""
    config = tmp_path / "gnau.toml"
    config.write_text(file_text)
    with pytest.raises(ConfigError) as refused:
        load_settings(config, environ, flags)
    assert str(refused.value).startswith(message.format(config=config)), str(refused.value)
    assert "invalid literal" not in str(refused.value)


def test_a_token_file_others_can_read_is_refused(tmp_path: Path) -> None:
    tokens = write_tokens(tmp_path / "tokens.json")
    assert read_token_file(tokens).legacy_tokens == {
        "op-token": Role.OPERATOR,
        "audit-token": Role.AUDITOR,
        "public-token": Role.PUBLIC,
    }
    tokens.chmod(0o644)
    with pytest.raises(AuthConfigError, match=r"mode 0644, which lets group or others"):
        read_token_file(tokens)


def test_a_database_url_ending_in_a_newline_names_the_database_without_it() -> None:
    # As a Kubernetes Secret made with `echo URL > url` gives it.
    url = "postgresql://gnau@db.internal:5432/gnau"
    settings = load_settings(None, {"GNAU_DATABASE": f"{url}\n"}, {})
    assert settings.database == url


def test_a_refused_workers_setting_quotes_a_long_value_cut_short() -> None:
    with pytest.raises(ConfigError) as refused:
        load_settings(None, {"GNAU_WORKERS": "x" * 10_000}, {})
    assert len(str(refused.value)) < 300, str(refused.value)
    assert "chars)" in str(refused.value)
