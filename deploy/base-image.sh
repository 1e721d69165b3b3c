#!/bin/sh
# The base image of deploy/Dockerfile, made from Debian's packages, for hosts that reach no
# container registry (air-gapped, or behind a network that lets only package mirrors through).
#
#   sudo deploy/base-image.sh                 # podman, or docker when podman is missing
#   sudo ENGINE=docker deploy/base-image.sh
#
# It runs mmdebstrap (Debian's package: mmdebstrap) to build a minimal Debian root file system
# holding Python 3.11 and its venv module, from the same apt sources as this host, and imports
# it under the name of the Dockerfile's FROM line, python:3.11-slim. A build then uses it
# unchanged (docs/operations.md, "Without a registry"). The name shadows Docker Hub's image on
# this host only: `docker pull python:3.11-slim` puts the official one back.
#
# Settings (environment): ENGINE (podman or docker), TAG (python:3.11-slim), SUITE (bookworm,
# whose python3 is 3.11), SOURCES (an apt sources file; default: this host's), and MIRROR, a
# mirror URL used instead of SOURCES.
set -eu
engine=${ENGINE:-$(command -v podman >/dev/null 2>&1 && echo podman || echo docker)}
tag=${TAG:-python:3.11-slim}
suite=${SUITE:-bookworm}
if [ -n "${MIRROR:-}" ]; then
    sources=$MIRROR
else
    sources=${SOURCES:-}
    for candidate in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
        [ -n "$sources" ] && break
        [ -s "$candidate" ] && sources=$candidate
    done
    [ -n "$sources" ] || { echo "base-image: no apt sources found: set SOURCES or MIRROR" >&2; exit 2; }
fi
command -v mmdebstrap >/dev/null || { echo "base-image: install mmdebstrap (apt-get install mmdebstrap)" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
started=$(date +%s)
# minbase: only Essential packages and apt. No recommended packages, no manuals, no
# translations; merged /usr made by mmdebstrap's hook, not by the usrmerge package (which would
# pull in the whole of perl).
mmdebstrap --quiet --variant=minbase \
    --include=python3,python3-venv,python-is-python3 \
    --aptopt='Apt::Install-Recommends "false"' \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    "$suite" "$work/root.tar" "$sources" 2>"$work/mmdebstrap.log" \
    || { cat "$work/mmdebstrap.log" >&2; exit 1; }
# (No --quiet: docker import has none. Its progress goes to the log, shown on failure.)
"$engine" import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python3"]' \
    "$work/root.tar" "$tag" >"$work/import.log" 2>&1 \
    || { cat "$work/import.log" >&2; exit 1; }
size=$("$engine" image inspect --format '{{.Size}}' "$tag")
echo "base-image: $tag from Debian $suite, $((size / 1000000)) MB, in $(($(date +%s) - started)) s ($engine)"
