"""docs/integration.md's table of ErrorInfo reasons is the code's, in both directions: every
reason the service can send is listed with the status code it is sent with, and nothing else.

What the service can send is found in its source, not assumed: an AST scan of
gnau_service/server finds where an ErrorInfo is built (one place, whose reason must be a
:class:`Reason`), and which reasons are used at all."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from gnau_service.server.grpc.statuses import REASON_CODES, Reason

REPOSITORY = Path(__file__).resolve().parents[2]
SERVER = REPOSITORY / "gnau_service" / "server"
DOC = REPOSITORY / "docs" / "integration.md"


def documented_reasons() -> dict[str, str]:
    """reason → code, from the rows of the section "Every ErrorInfo reason"."""
    section = DOC.read_text(encoding="utf-8").split("### Every ErrorInfo reason", 1)[1]
    section = section.split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([A-Z_]+)` \| `([A-Z_]+)` \|", section, flags=re.MULTILINE)
    reasons = [reason for reason, _ in rows]
    assert len(reasons) == len(set(reasons)), "a reason is listed twice"
    return dict(rows)


def server_modules() -> dict[str, ast.Module]:
    return {
        path.relative_to(SERVER).as_posix(): ast.parse(path.read_text(encoding="utf-8"))
        for path in SERVER.rglob("*.py")
    }


def test_every_reason_the_service_sends_is_listed_with_its_code() -> None:
    assert documented_reasons() == {str(r): REASON_CODES[r].name for r in Reason}
    assert set(REASON_CODES) == set(Reason)


def test_an_error_info_is_built_in_one_place_and_only_from_a_reason() -> None:
    """So no reason can be sent as a string literal the enum (and the table) do not know."""
    builders = []
    for name, module in server_modules().items():
        for node in ast.walk(module):
            # One with fields is one being sent; an empty one is a target to unpack a read into.
            if isinstance(node, ast.Call) and _called(node) == "ErrorInfo" and node.keywords:
                builders.append((name, node))
            # No string literal that looks like a reason is handed to a status builder.
            if isinstance(node, ast.Call) and _called(node) in ("_status", "_precondition"):
                for argument in [*node.args, *(keyword.value for keyword in node.keywords)]:
                    assert not (
                        isinstance(argument, ast.Constant)
                        and isinstance(argument.value, str)
                        and re.fullmatch(r"[A-Z_]+", argument.value)
                    ), f"{name}:{node.lineno}: reason {argument.value!r} as a literal"
    ((name, call),) = builders
    assert name == "grpc/statuses.py"
    (reason,) = (keyword.value for keyword in call.keywords if keyword.arg == "reason")
    # reason=str(reason), where the enclosing _status's parameter is annotated Reason.
    assert ast.unparse(reason) == "str(reason)"
    (status,) = (
        node
        for node in ast.walk(server_modules()["grpc/statuses.py"])
        if isinstance(node, ast.FunctionDef) and node.name == "_status"
    )
    annotations = {
        arg.arg: ast.unparse(arg.annotation) for arg in status.args.args if arg.annotation
    }
    assert annotations["reason"] == "Reason"


def test_every_reason_is_used_by_the_server() -> None:
    """Nothing extra: each member is referenced outside its own definition and the code map."""
    used: set[str] = set()
    for module in server_modules().values():
        for node in ast.walk(module):
            if isinstance(node, ast.ClassDef) and node.name == "Reason":
                continue
            if isinstance(node, ast.AnnAssign) and ast.unparse(node.target) == "REASON_CODES":
                continue
            for child in ast.walk(node) if isinstance(node, ast.FunctionDef | ast.ClassDef) else ():
                if (
                    isinstance(child, ast.Attribute)
                    and isinstance(child.value, ast.Name)
                    and child.value.id == "Reason"
                ):
                    used.add(child.attr)
    assert used == {member.name for member in Reason}


def _called(call: ast.Call) -> str:
    function = call.func
    return function.attr if isinstance(function, ast.Attribute) else ast.unparse(function)
