"""The gRPC contract: proto/ lints clean under buf, and the committed generated code is exactly
what scripts/generate_stubs.sh makes from it today."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GENERATED = ROOT / "clients" / "python" / "src" / "gnau"
SCRIPT = ROOT / "scripts" / "generate_stubs.sh"


def _tree(directory: Path) -> dict[str, bytes]:
    return {
        path.relative_to(directory).as_posix(): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }


def _generate(out: Path) -> None:
    env = {**os.environ, "PYTHON": sys.executable}
    result = subprocess.run(
        ["bash", str(SCRIPT), str(out)], env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


def _buf() -> str:
    scripts = Path(sys.executable).parent
    candidate = scripts / "buf"
    found = str(candidate) if candidate.exists() else shutil.which("buf")
    assert found, "buf not found: install the buf-bin package"
    return found


def _buf_lint(workdir: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BUF_CACHE_DIR": str(tmp_path / "buf-cache")}
    return subprocess.run(
        [_buf(), "lint"], cwd=workdir, env=env, capture_output=True, text=True, check=False
    )


def test_committed_stubs_are_a_fresh_generation(tmp_path: Path) -> None:
    _generate(tmp_path)
    fresh, committed = _tree(tmp_path / "gnau"), _tree(GENERATED)
    assert sorted(fresh) == sorted(committed), "regenerate: scripts/generate_stubs.sh"
    stale = [name for name in fresh if fresh[name] != committed[name]]
    assert not stale, f"stale generated files (run scripts/generate_stubs.sh): {stale}"


def test_generation_is_deterministic_and_touches_only_gnau(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("not generated")
    (tmp_path / "gnau" / "v1").mkdir(parents=True)
    (tmp_path / "gnau" / "v1" / "stale_pb2.py").write_text("# a module whose proto is gone")
    _generate(tmp_path)
    first = _tree(tmp_path)
    _generate(tmp_path)
    assert _tree(tmp_path) == first
    assert (tmp_path / "keep.txt").read_text() == "not generated"
    assert "gnau/v1/stale_pb2.py" not in first


def test_generated_imports_need_no_rewriting() -> None:
    for path in GENERATED.rglob("*.py"):
        text = path.read_text()
        assert "import gnau_client" not in text
        for line in text.splitlines():
            if line.startswith("from gnau"):
                assert line.startswith("from gnau.v1 import "), (path, line)


def test_server_and_client_share_one_copy_of_the_messages() -> None:
    import gnau_client
    from gnau.v1 import dealer_pb2, round_pb2

    assert Path(dealer_pb2.__file__).resolve().is_relative_to(GENERATED)
    assert gnau_client.Round is round_pb2.Round
    field = dealer_pb2.ShuffleResponse.DESCRIPTOR.fields_by_name["round"]
    assert field.message_type is round_pb2.Round.DESCRIPTOR


def test_buf_lint_passes(tmp_path: Path) -> None:
    result = _buf_lint(ROOT, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_buf_lint_enforces_comments_and_unspecified_zero_values(tmp_path: Path) -> None:
    work = tmp_path / "repo"
    shutil.copytree(ROOT / "proto", work / "proto")
    shutil.copy(ROOT / "buf.yaml", work / "buf.yaml")
    types = work / "proto" / "gnau" / "v1" / "types.proto"
    text = types.read_text()
    text = text.replace("  // The hand's category.\n", "")
    text = text.replace("TIE_RULE_UNSPECIFIED = 0", "TIE_RULE_NONE = 0")
    types.write_text(text)
    result = _buf_lint(work, tmp_path)
    assert result.returncode != 0
    assert 'Field "category" should have a non-empty comment' in result.stdout
    assert '"TIE_RULE_NONE" should be suffixed with "_UNSPECIFIED"' in result.stdout


@pytest.mark.parametrize(
    ("service", "methods"),
    [
        (
            "DealerService",
            [
                "Shuffle",
                "Deal",
                "Reveal",
                "Settle",
                "VoidRound",
                "GetRound",
                "ListRounds",
                "EvaluateHand",
                "GetRoundReceipt",
                "GetHouseRulesInfo",
                "ForgetPlayer",
                "PutTable",
                "SetTableEnabled",
                "ListTables",
            ],
        ),
        (
            "AuditService",
            [
                "GetCheckpoint",
                "GetCheckpoints",
                "GetEntries",
                "GetInclusionProof",
                "GetConsistencyProof",
                "GetPublicKeys",
                "WatchEntries",
                "VerifyRound",
                "LookupPlayer",
                "GetReport",
                "VerifySoftware",
            ],
        ),
    ],
)
def test_services_have_the_documented_methods(service: str, methods: list[str]) -> None:
    from gnau.v1 import audit_pb2, dealer_pb2

    descriptor = {
        "DealerService": dealer_pb2.DESCRIPTOR,
        "AuditService": audit_pb2.DESCRIPTOR,
    }[service].services_by_name[service]
    assert [method.name for method in descriptor.methods] == methods
    streaming = {method.name for method in descriptor.methods if method.server_streaming}
    audit_streams = {"GetCheckpoints", "GetEntries", "WatchEntries"}
    assert streaming == (audit_streams if service == "AuditService" else set())
    for method in descriptor.methods:
        assert method.input_type.name == f"{method.name}Request"
        assert method.output_type.name == f"{method.name}Response"
        mutating = service == "DealerService" and method.name in {
            "Shuffle",
            "Deal",
            "Reveal",
            "Settle",
            "VoidRound",
            "ForgetPlayer",
        }
        assert ("request_id" in method.input_type.fields_by_name) == mutating


def test_money_is_int64_and_house_rules_have_presence() -> None:
    from gnau.v1 import round_pb2, types_pb2
    from google.protobuf.descriptor import FieldDescriptor
    from google.protobuf.message import Message

    fields: list[tuple[type[Message], str]] = [
        (round_pb2.Seat, "stake"),
        (round_pb2.SeatResult, "stake"),
        (round_pb2.SeatResult, "delta"),
        (round_pb2.Settlement, "dealer_delta"),
    ]
    for message, name in fields:
        assert message.DESCRIPTOR.fields_by_name[name].type == FieldDescriptor.TYPE_INT64
    rules = types_pb2.HouseRules.DESCRIPTOR
    for name in ("ten_is_duke", "three_six_pair", "trips_make_ox", "five_small"):
        assert rules.fields_by_name[name].has_presence
    assert rules.fields_by_name["suited_double"].has_presence
    assert rules.fields_by_name["decks"].has_presence
    assert not types_pb2.HouseRules().HasField("trips_make_ox")


def _buf_breaking(workdir: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BUF_CACHE_DIR": str(tmp_path / "buf-cache")}
    return subprocess.run(
        [_buf(), "breaking", "--against", "proto/release-baseline.binpb"],
        cwd=workdir, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip


def test_buf_breaking_passes_against_the_release_baseline(tmp_path: Path) -> None:
    result = _buf_breaking(ROOT, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_buf_breaking_refuses_a_removed_field(tmp_path: Path) -> None:
    work = tmp_path / "repo"
    shutil.copytree(ROOT / "proto", work / "proto")
    shutil.copy(ROOT / "buf.yaml", work / "buf.yaml")
    round_proto = work / "proto" / "gnau" / "v1" / "round.proto"
    text = round_proto.read_text()
    text = text.replace("  string void_reason = 15;\n", "  reserved 15;\n")
    round_proto.write_text(text)
    result = _buf_breaking(work, tmp_path)
    assert result.returncode != 0
    assert 'Previously present field "15" with name "void_reason"' in result.stdout


def test_buf_gen_yaml_writes_what_the_go_example_builds_with(tmp_path: Path) -> None:
    """buf.gen.yaml and examples/go-table-service/build.sh's protoc make the same Go stubs (but
    for the protoc version in each header), in package gnauv1 of the protos' go_package."""
    plugins = ("protoc", "protoc-gen-go", "protoc-gen-go-grpc")
    missing = [plugin for plugin in plugins if shutil.which(plugin) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not found (Debian packages: see the Go example)")
    env = {**os.environ, "BUF_CACHE_DIR": str(tmp_path / "buf-cache")}
    by_buf, by_protoc = tmp_path / "buf", tmp_path / "protoc"
    subprocess.run(
        [_buf(), "generate", "--output", str(by_buf)], cwd=ROOT, env=env, check=True,
        capture_output=True,
    )  # fmt: skip
    module = "github.com/gnau-dealer/gnau/gen/go"
    by_protoc.mkdir()
    subprocess.run(
        [
            "protoc", "-I", "proto", f"--go_out={by_protoc}", f"--go_opt=module={module}",
            f"--go-grpc_out={by_protoc}", f"--go-grpc_opt=module={module}",
            *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "proto").rglob("*.proto")),
        ],
        cwd=ROOT, check=True, capture_output=True,
    )  # fmt: skip

    def stubs(directory: Path) -> dict[str, list[str]]:
        return {
            name: [
                line for line in text.decode().splitlines() if not line.startswith("// \tprotoc ")
            ]
            for name, text in _tree(directory).items()
        }

    made = stubs(by_buf)
    assert sorted(made) == [
        f"gnau/v1/{name}.pb.go"
        for name in ("audit", "audit_grpc", "dealer", "dealer_grpc", "round", "types")
    ]
    assert made == stubs(by_protoc)
    assert all("package gnauv1" in lines for lines in made.values())
