#!/usr/bin/env bash
# Build examples/go-table-service offline from Debian's Go packages:
#
#   examples/go-table-service/build.sh [BUILD_DIR]      # make example-go runs it
#
# BUILD_DIR (default examples/go-table-service/build, not committed) receives the gnau.v1 Go
# stubs, generated from proto/gnau/v1 by protoc with protoc-gen-go and protoc-gen-go-grpc
# (`buf generate` with the repository's buf.gen.yaml makes the same files), and the binary,
# BUILD_DIR/go-table-service, once `go vet` and `go test` (main_test.go) pass.
#
# Needs (Debian 12): golang-go golang-google-grpc-dev golang-google-protobuf-dev
# golang-google-genproto-dev golang-github-golang-protobuf-1-5-dev protobuf-compiler
# protoc-gen-go protoc-gen-go-grpc. Debian lays its Go sources out as a GOPATH,
# /usr/share/gocode, so the build runs in GOPATH mode with that GOPATH behind its own: no module
# proxy, no network. (Module mode with `replace` lines pointing into /usr/share/gocode does not
# work offline: Debian's genproto go.mod requires golang.org/x/lint, x/tools and others that no
# package ships, and module mode loads every go.mod of the graph.) The first build compiles
# grpc-go and its dependencies: 12 s on 2 idle cores, 47 s on 2 busy ones (measured with an
# empty GOCACHE); with Go's build cache warm the whole script takes about 6 s (mostly linking
# the test binary), and the build alone under a second.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${1:-$here/build}"
mkdir -p "$build"
build="$(cd "$build" && pwd)"

for tool in go protoc protoc-gen-go protoc-gen-go-grpc; do
    command -v "$tool" >/dev/null || { echo "build.sh: $tool not found (see the packages above)" >&2; exit 2; }
done

module=github.com/gnau-dealer/gnau/gen/go  # the proto files' go_package, less gnau/v1
gen="$build/gopath/src/$module"
rm -rf "$gen"
mkdir -p "$gen"
protoc -I "$root/proto" \
    --go_out="$gen" --go_opt=module="$module" \
    --go-grpc_out="$gen" --go-grpc_opt=module="$module" \
    "$root"/proto/gnau/v1/*.proto

cd "$here"
export GO111MODULE=off GOFLAGS= GOPROXY=off GOPATH="$build/gopath:/usr/share/gocode"
go vet .
go test -count=1 .  # the commitment against the Python reference's vector
go build -o "$build/go-table-service" .
