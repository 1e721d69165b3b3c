#!/usr/bin/env bash
# Generate the Python messages, gRPC stubs and typing stubs from proto/gnau/v1/*.proto.
#
#   scripts/generate_stubs.sh [OUT_DIR]
#
# OUT_DIR defaults to clients/python/src, where the output is committed: the package tree
# gnau/v1/{types,round,dealer,audit}_pb2{.py,.pyi} and {dealer,audit}_pb2_grpc{.py,.pyi}, plus
# gnau/__init__.py, gnau/v1/__init__.py and gnau/py.typed. protoc runs in proto/ with -I. (the
# same as -Iproto from the root), so the generated imports (`from gnau.v1 import types_pb2`) are
# right as they stand: nothing is rewritten. Only OUT_DIR/gnau is replaced; nothing else in
# OUT_DIR is touched.
#
# The generators are those of the Python that runs the script: $PYTHON if set, else the
# repository's .venv, else python3 (it needs grpcio-tools and mypy-protobuf). The same inputs and
# tool versions give the same bytes (tests/clients/test_contract.py checks the committed
# output against a fresh run).
set -euo pipefail
export LC_ALL=C

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$root/clients/python/src}"
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x "$root/.venv/bin/python" ]]; then PYTHON="$root/.venv/bin/python"; else PYTHON=python3; fi
fi
if [[ "$PYTHON" == */* ]]; then  # a path: make it absolute, as the script changes directory
    PYTHON="$(cd "$(dirname "$PYTHON")" && pwd)/$(basename "$PYTHON")"
fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"

# The mypy-protobuf plugins live next to the interpreter's scripts, which need not be on PATH.
scripts="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')"
for plugin in protoc-gen-mypy protoc-gen-mypy_grpc; do
    if [[ ! -x "$scripts/$plugin" ]]; then
        echo "generate_stubs: $scripts/$plugin not found: install mypy-protobuf" >&2
        exit 2
    fi
done

cd "$root/proto"
mapfile -t protos < <(find gnau -name '*.proto' | sort)
# gRPC stubs only for the files that define a service (the others would get empty modules).
mapfile -t services < <(grep -l '^service ' "${protos[@]}")

rm -rf "$out/gnau"
# -I. (the proto root) is the only import path besides grpc_tools' well-known types, so each
# module is named after its path: gnau/v1/round.proto -> gnau.v1.round_pb2.
"$PYTHON" -m grpc_tools.protoc -I. \
    --plugin="protoc-gen-mypy=$scripts/protoc-gen-mypy" \
    --python_out="$out" --mypy_out=quiet:"$out" \
    "${protos[@]}"
"$PYTHON" -m grpc_tools.protoc -I. \
    --plugin="protoc-gen-mypy_grpc=$scripts/protoc-gen-mypy_grpc" \
    --grpc_python_out="$out" --mypy_grpc_out=quiet:"$out" \
    "${services[@]}"

# protoc writes modules only; make gnau and gnau.v1 regular, typed packages.
cat > "$out/gnau/__init__.py" <<'PY'
"""Generated protobuf code of the Gnau Dealer API (package ``gnau.v1``). Do not edit.

Regenerate with ``scripts/generate_stubs.sh`` from ``proto/gnau/v1/*.proto``.
"""
PY
cat > "$out/gnau/v1/__init__.py" <<'PY'
"""Generated messages (``*_pb2``) and gRPC stubs (``*_pb2_grpc``) of ``gnau.v1``. Do not edit."""
PY
: > "$out/gnau/py.typed"
