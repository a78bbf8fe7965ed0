#!/usr/bin/env bash
# Makes the certificates of mutual TLS between siteops and a self-hosted
# Temporal frontend, with openssl, into DIR (a new or empty directory):
#
#   ca.pem, ca-key.pem          the certificate authority: it signs the
#                               frontend's certificate and every client's,
#                               and the frontend trusts the clients it signed
#   frontend.pem, frontend-key.pem
#                               the frontend's certificate, for the name
#                               temporal-frontend.temporal.svc.cluster.local
#                               and each NAME given (a DNS name or an IP
#                               address), with the server and the client
#                               authentication usages (Temporal's own services
#                               present it to the frontend too)
#   client.pem, client-key.pem  the client certificate of siteops' worker and
#                               CLI (CN siteops), client authentication only
#   ingress.pem, ingress-key.pem
#                               the ingress's client certificate (CN
#                               siteops-ingress): siteops' server build keeps
#                               it to signals (SITEOPS_TEMPORAL_SIGNAL_ONLY in
#                               deploy/kubernetes/temporal/configmap.yaml)
#
#   deploy/tls-certs.sh DIR [NAME ...]
#
# Keys are ECDSA P-256, written 0600; the certificates are valid for
# TLS_CERT_DAYS days (default 365; the CA for twice that). It refuses a DIR
# that holds any of these files, writing nothing: making them again would
# replace the CA that every certificate in use chains to. It prints the
# kubectl commands that turn the files into the Secrets temporal-tls
# (namespace temporal) and siteops-temporal-tls (namespace siteops) that the
# manifests mount, and siteops-ingress-temporal-tls for the ingress. Clusters that run cert-manager can issue the same
# Secrets instead: deploy/kubernetes/cert-manager.example.yaml.
set -eu

if [ $# -lt 1 ] || [ -z "$1" ]; then
  echo "usage: $0 DIR [NAME ...]: the certificates go into DIR; each NAME (a DNS name or an IP address) is added to the frontend's" >&2
  exit 2
fi
dir=$1
shift
days=${TLS_CERT_DAYS:-365}
case $days in
  '' | *[!0-9]* | 0)
    echo "TLS_CERT_DAYS=$days: want a whole number of days above 0" >&2
    exit 2
    ;;
esac
command -v openssl >/dev/null 2>&1 || {
  echo "openssl is not installed (Debian: openssl)" >&2
  exit 2
}

files="ca.pem ca-key.pem frontend.pem frontend-key.pem client.pem client-key.pem ingress.pem ingress-key.pem"
for f in $files; do
  if [ -e "$dir/$f" ]; then
    echo "$dir/$f exists: refusing to make the certificates again, which would replace the CA every certificate in use chains to; nothing was written. Use another DIR, or remove the old files first if you mean to replace them all." >&2
    exit 1
  fi
done

# The frontend's names: the Service's, then the ones given.
sans="DNS:temporal-frontend.temporal.svc.cluster.local"
for name in "$@"; do
  case $name in
    *[!0-9.]* | '')
      case $name in
        *:*) sans="$sans,IP:$name" ;; # an IPv6 address
        *) sans="$sans,DNS:$name" ;;
      esac
      ;;
    *) sans="$sans,IP:$name" ;;
  esac
done

mkdir -p "$dir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
umask 077

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# Everything is made in a scratch directory and moved into DIR at the end,
# so that a failure halfway leaves DIR as it was.
key "$work/ca-key.pem"
openssl req -x509 -new -key "$work/ca-key.pem" -sha256 -days $((2 * days)) -subj "/CN=siteops Temporal CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -out "$work/ca.pem" 2>/dev/null

# sign NAME SUBJECT EXTENSIONS: a key and a certificate signed by the CA.
sign() {
  key "$work/$1-key.pem"
  openssl req -new -key "$work/$1-key.pem" -subj "$2" -out "$work/$1.csr" 2>/dev/null
  printf '%s\n' "$3" >"$work/$1.ext"
  openssl x509 -req -in "$work/$1.csr" -CA "$work/ca.pem" -CAkey "$work/ca-key.pem" -CAcreateserial \
    -days "$days" -sha256 -extfile "$work/$1.ext" -out "$work/$1.pem" 2>/dev/null
}
sign frontend "/CN=temporal-frontend.temporal.svc.cluster.local" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$sans"
sign client "/CN=siteops" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"
sign ingress "/CN=siteops-ingress" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"

for f in $files; do
  mv "$work/$f" "$dir/$f"
done
chmod 0644 "$dir/ca.pem" "$dir/frontend.pem" "$dir/client.pem" "$dir/ingress.pem"
chmod 0600 "$dir/ca-key.pem" "$dir/frontend-key.pem" "$dir/client-key.pem" "$dir/ingress-key.pem"

echo "made in $dir: ca.pem (valid $((2 * days)) days), frontend.pem for $sans, client.pem for siteops, ingress.pem for siteops-ingress (valid $days days); keys 0600"
echo "Keep ca-key.pem offline: it signs every certificate the frontend trusts. The Secrets:"
echo "  kubectl -n temporal create secret generic temporal-tls --from-file=tls.crt=$dir/frontend.pem --from-file=tls.key=$dir/frontend-key.pem --from-file=ca.crt=$dir/ca.pem"
echo "  kubectl -n siteops create secret generic siteops-temporal-tls --from-file=tls.crt=$dir/client.pem --from-file=tls.key=$dir/client-key.pem --from-file=ca.crt=$dir/ca.pem"
echo "  kubectl -n siteops create secret generic siteops-ingress-temporal-tls --from-file=tls.crt=$dir/ingress.pem --from-file=tls.key=$dir/ingress-key.pem --from-file=ca.crt=$dir/ca.pem"
