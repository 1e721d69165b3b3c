#!/bin/sh
# The secret files of deploy/compose.yaml, each with the owner and mode its reader needs.
# Compose bind-mounts a file secret as it is on the host (same owner, same mode; the uid, gid and
# mode of the long secret syntax apply to Swarm only), and the dealer, uid 10001 in the image,
# takes a key, token or password file only at mode 0600 owned by itself. Run it as root:
#   sudo deploy/compose-secrets.sh deploy/secrets
# An existing file is kept (run it again to repair owners and modes); to replace a secret,
# delete its file first. No secret is ever printed: read the tokens from operator-token and auditor-token.
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
# Two tokens, each URL-safe base64 of 32 random bytes: an operator token of the operator
# "default", and an auditor token of every operator (gnau audit export and watch take only that
# one). The dealers' token file keeps only their SHA-256 (as `gnau token add` writes them); the
# tokens themselves go to operator-token and auditor-token, which no container mounts: read them
# from there, then keep them where your secrets live.
draw_token() {
    # Never starting with "-": a command line's --token TOKEN would read it as an option.
    token=-
    while [ "${token#-}" != "$token" ]; do
        token=$(openssl rand -base64 32 | tr '+/' '-_' | tr -d '=\n')
    done
    printf '%s\n' "$token" > "$dir/$1"
    printf '%s' "$token" | openssl dgst -sha256 -r | cut -d' ' -f1
}
if missing tokens.json; then
    operator=$(draw_token operator-token)
    auditor=$(draw_token auditor-token)
    created=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    printf '{"tokens": [%s, %s]}\n' \
        "{\"name\": \"operator\", \"role\": \"operator\", \"operator\": \"default\", \"sha256\": \"$operator\", \"created\": \"$created\"}" \
        "{\"name\": \"auditor\", \"role\": \"auditor\", \"operator\": \"*\", \"sha256\": \"$auditor\", \"created\": \"$created\"}" \
        > "$dir/tokens.json"
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
for token_file in operator-token auditor-token; do
    if [ -e "$dir/$token_file" ]; then chown 0:0 "$dir/$token_file"; chmod 600 "$dir/$token_file"; fi
done
echo "compose-secrets: $dir: log-signing-key.pem, tokens.json, pgpass (uid $service_uid, 0600);" \
    "postgres-password, operator-token, auditor-token (root, 0600)"
