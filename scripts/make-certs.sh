#!/usr/bin/env bash
# Makes a cluster's TLS material with the openssl command:
#   scripts/make-certs.sh DIR NAME...
# DIR/ca.pem and DIR/ca.key: the cluster's CA (its key signs, keep it
# off the nodes); DIR/NAME.pem and DIR/NAME.key for each NAME (a node, the
# shell, a joiner). Existing files are kept, so more names can be added
# later with the same CA. Keys are EC P-256, unencrypted, mode 0600.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 DIR NAME..." >&2
  exit 2
fi
dir=$1
shift
mkdir -p "$dir"
umask 077
days=${TROUPE_CERT_DAYS:-825}
if [ ! -f "$dir/ca.pem" ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$dir/ca.key" -out "$dir/ca.pem" -days "$days" \
    -subj "/CN=troupe cluster CA" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
fi
for name in "$@"; do
  case $name in
    ca|*/*|"") echo "$0: bad name \"$name\"" >&2; exit 2 ;;
  esac
  [ -f "$dir/$name.pem" ] && continue
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$dir/$name.key" -out "$dir/$name.csr" -subj "/CN=$name" \
    2>/dev/null
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\n' \
    > "$dir/$name.ext"
  openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
    -CAcreateserial -out "$dir/$name.pem" -days "$days" \
    -extfile "$dir/$name.ext" 2>/dev/null
  rm -f "$dir/$name.csr" "$dir/$name.ext"
done
echo "$dir: CA ca.pem; certificates for: $*"
