#!/bin/sh
# The secret files of deploy/compose.yaml, each with the owner and mode its reader needs.
# Compose bind-mounts a file secret as it is on the host (same owner, same mode; the uid, gid and
# mode of the long secret syntax apply to Swarm only), and the dealer, uid 10001 in the image,
# takes a key, token or password file only at mode 0600 owned by itself. Run it as root:
#   sudo deploy/compose-secrets.sh deploy/secrets
# An existing file is kept (run it again to repair owners and modes); to replace a secret,
# delete its file first. No secret is ever printed: read the operator token from operator-token.
set -eu
dir=${1:?usage: compose-secrets.sh DIRECTORY}
service_uid=${GNAU_SERVICE_UID:-10001}
umask 077
mkdir -p "$dir"
chmod 700 "$dir"

missing() { [ ! -e "$dir/$1" ]; }

# The log's Ed25519 key (unencrypted PKCS#8 PEM), shared by both dealers: one log, one key.
if missing log-signing-key.pem; then
    openssl genpkey -algorithm ed25519 -out "$dir/log-signing-key.pem"
fi
# One operator token, URL-safe base64 of 32 random bytes. The dealers' token file keeps only its
# SHA-256 (as `gnau token add` writes it); the token itself goes to operator-token, which no
# container mounts: read it from there, then keep it where your secrets live.
if missing tokens.json; then
    # Never starting with "-": a command line's --token TOKEN would read it as an option.
    token=-
    while [ "${token#-}" != "$token" ]; do
        token=$(openssl rand -base64 32 | tr '+/' '-_' | tr -d '=\n')
    done
    digest=$(printf '%s' "$token" | openssl dgst -sha256 -r | cut -d' ' -f1)
    created=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    printf '%s\n' "$token" > "$dir/operator-token"
    printf '{"tokens": [{"name": "operator", "role": "operator", "sha256": "%s", "created": "%s"}]}\n' \
        "$digest" "$created" > "$dir/tokens.json"
fi
# The database password: the postgres image's entrypoint reads this file as root, before it
# drops to its postgres user; the dealers read the same password from pgpass, through libpq.
if missing postgres-password; then
    openssl rand -hex 32 > "$dir/postgres-password"
fi
if missing pgpass; then
    printf 'postgres:5432:gnau:gnau:%s\n' "$(cat "$dir/postgres-password")" > "$dir/pgpass"
fi

chown "$service_uid:$service_uid" "$dir/log-signing-key.pem" "$dir/tokens.json" "$dir/pgpass"
chown 0:0 "$dir/postgres-password"
chmod 600 "$dir/log-signing-key.pem" "$dir/tokens.json" "$dir/pgpass" "$dir/postgres-password"
if [ -e "$dir/operator-token" ]; then chown 0:0 "$dir/operator-token"; chmod 600 "$dir/operator-token"; fi
echo "compose-secrets: $dir: log-signing-key.pem, tokens.json, pgpass (uid $service_uid, 0600);" \
    "postgres-password, operator-token (root, 0600)"
