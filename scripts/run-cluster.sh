#!/usr/bin/env bash
# make run-cluster: a PostgreSQL cluster, an S3 server and two labd sharing
# them, on this machine. Host a serves on the default ports (8090 to 8095),
# host b on 8190 to 8195; both hold every service, keep their key-value
# state in the one database and their blobs in the one bucket (the S3
# server on 127.0.0.1:8099, lab-s3server), share one coordination root key
# and answer requests signed for one audience (host a's coordination
# address, standing in for the address of a load balancer in front of
# both). State lives under $LAB_CLUSTER_DIR (./data/cluster). Ctrl-C stops
# the four processes.
# docs/scale-out.md says how the same settings run across machines.
set -euo pipefail
cd "$(dirname "$0")/.."

dir="${LAB_CLUSTER_DIR:-$PWD/data/cluster}"
bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
[ -x "$bin/postgres" ] || { echo "PostgreSQL's server is required (Debian: apt-get install postgresql)"; exit 1; }
cargo build --release -p labd -p labctl -p lab-s3server
mkdir -p "$dir"

# PostgreSQL refuses to run as root: then it runs as nobody.
as_owner=()
if [ "$(id -u)" = 0 ]; then
    as_owner=(setpriv --reuid nobody --regid nogroup --clear-groups --)
    chown nobody "$dir"
fi
pg="$dir/postgres"
if [ ! -d "$pg/data" ]; then
    mkdir -p "$pg"
    [ "$(id -u)" = 0 ] && chown nobody "$pg"
    "${as_owner[@]}" "$bin/initdb" --username=lab --auth=trust -D "$pg/data" >/dev/null
fi
"${as_owner[@]}" "$bin/postgres" -D "$pg/data" -c listen_addresses= \
    -c "unix_socket_directories=$pg" -c fsync=on -c synchronous_commit=on \
    >"$pg/server.log" 2>&1 &
postgres=$!
s3_address=127.0.0.1:8099
rm -f "$dir/s3.env"
./target/release/lab-s3server "$dir/s3" "$s3_address" lab-blobs >"$dir/s3.env" &
s3=$!
hosts=()
stop() {
    for pid in "${hosts[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    wait "${hosts[@]}" 2>/dev/null || true
    kill -TERM "$s3" 2>/dev/null || true
    kill -INT "$postgres" 2>/dev/null || true
    wait "$s3" "$postgres" 2>/dev/null || true
}
trap stop EXIT INT TERM
until "$bin/pg_isready" -q -h "$pg" -U lab; do
    kill -0 "$postgres" 2>/dev/null || { cat "$pg/server.log"; exit 1; }
    sleep 0.1
done

# The server prints the AWS environment that reaches it once it listens.
until [ -s "$dir/s3.env" ] && grep -q AWS_SECRET_ACCESS_KEY "$dir/s3.env"; do
    kill -0 "$s3" 2>/dev/null || { echo "the S3 server did not start"; exit 1; }
    sleep 0.1
done
set -a
. "$dir/s3.env"
set +a

key="$dir/root.key"
[ -f "$key" ] || ./target/release/labctl keygen --out "$key" >/dev/null
principal="$(./target/release/labctl --key "$key" principal)"
store="postgresql://lab@/postgres?host=$pg"
audience="http://127.0.0.1:8094"

host() { # NAME FIRST_PORT
    local port=$2
    ./target/release/labd --data-dir "$dir/$1" --store "$store" --blobs s3://lab-blobs \
        --coord-root-key "$principal" --coord-issuer-key-file "$key" \
        --coord-audience "$audience" \
        --bytes-listen "127.0.0.1:$port" --bytes-management-listen "127.0.0.1:$((port + 1))" \
        --journal-listen "127.0.0.1:$((port + 2))" --journal-management-listen "127.0.0.1:$((port + 3))" \
        --coord-listen "127.0.0.1:$((port + 4))" --coord-management-listen "127.0.0.1:$((port + 5))" &
    hosts+=($!)
}
host a 8090
host b 8190
echo "PostgreSQL on $pg; S3 on $s3_address (bucket lab-blobs); host a on 8090-8095, host b on 8190-8195; root key $key ($principal); audience $audience"
wait -n "${hosts[@]}"
