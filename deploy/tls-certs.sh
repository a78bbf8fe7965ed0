#!/usr/bin/env bash
# Makes the certificates of mutual TLS between siteops and a self-hosted
# Temporal frontend, with openssl. Each client certificate names its role
# in its subject's organizational unit (OU), which the role policy of
# siteops' server build reads (docs/kubernetes.md, "Identities and roles"):
# a certificate without a role is refused every call.
#
#   deploy/tls-certs.sh DIR [NAME ...]
#
# makes into DIR (a new or empty directory):
#
#   ca.pem, ca-key.pem          the certificate authority: it signs the
#                               frontend's certificate and every client's,
#                               and the frontend trusts the clients it signed
#   frontend.pem, frontend-key.pem
#                               the frontend's certificate (OU admin), for the
#                               name temporal-frontend.temporal.svc.cluster.local
#                               and each NAME given (a DNS name or an IP
#                               address), with the server and the client
#                               authentication usages (Temporal's own services
#                               present it to the frontend too)
#   client.pem, client-key.pem  the worker's client certificate (CN siteops,
#                               OU worker), client authentication only
#   ingress.pem, ingress-key.pem
#                               the ingress's (CN siteops-ingress, OU ingress):
#                               the relay's signals and starts, nothing else
#
#   deploy/tls-certs.sh --role ROLE --name NAME DIR
#
# issues one more client certificate from the CA in DIR: NAME-ROLE.pem and
# NAME-ROLE-key.pem, CN NAME, OU ROLE. ROLE is oncall (one per person: NAME
# is who runs the playbooks, and Temporal records it), partner (NAME is the
# partner's namespace; its Nexus endpoint is siteops-NAME), admin, worker or
# ingress. It refuses a NAME-ROLE.pem that exists.
#
# Keys are ECDSA P-256, written 0600; the certificates are valid for
# TLS_CERT_DAYS days (default 365; the CA for twice that). The first form
# refuses a DIR that holds any of its files, writing nothing: making them
# again would replace the CA that every certificate in use chains to. It
# prints the kubectl commands that turn the files into the Secrets
# temporal-tls (namespace temporal), siteops-temporal-tls and
# siteops-ingress-temporal-tls (namespace siteops) that the manifests mount.
# Clusters that run cert-manager can issue the same Secrets instead:
# deploy/kubernetes/cert-manager.example.yaml.
set -eu

usage="usage: $0 DIR [NAME ...] (the CA, the frontend's, the worker's and the ingress's certificates; each NAME, a DNS name or an IP address, is added to the frontend's), or $0 --role ROLE --name NAME DIR (one more client certificate from DIR's CA)"
role=""
cn=""
while [ $# -gt 0 ]; do
  case $1 in
    --role) role=${2:-}; shift 2 || { echo "$usage" >&2; exit 2; } ;;
    --name) cn=${2:-}; shift 2 || { echo "$usage" >&2; exit 2; } ;;
    --) shift; break ;;
    -*) echo "$1: unknown flag; $usage" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ $# -lt 1 ] || [ -z "$1" ]; then
  echo "$usage" >&2
  exit 2
fi
dir=$1
shift
if [ -n "$role$cn" ]; then
  case $role in
    admin | worker | ingress | oncall | partner) ;;
    *) echo "--role $role: want one of admin, worker, ingress, oncall, partner" >&2; exit 2 ;;
  esac
  case $cn in
    '' | [!A-Za-z0-9]* | *[!A-Za-z0-9._-]*) echo "--name '$cn': want a name of letters, digits, and . _ - after the first (a person, or a partner's namespace)" >&2; exit 2 ;;
  esac
  if [ $# -gt 0 ]; then
    echo "--role issues one client certificate: NAMEs ($*) are for the frontend's, in the first form" >&2
    exit 2
  fi
fi
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

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# sign NAME SUBJECT EXTENSIONS: a key and a certificate signed by the CA
# in $work, both in $work.
sign() {
  key "$work/$1-key.pem"
  openssl req -new -key "$work/$1-key.pem" -subj "$2" -out "$work/$1.csr" 2>/dev/null
  printf '%s\n' "$3" >"$work/$1.ext"
  openssl x509 -req -in "$work/$1.csr" -CA "$work/ca.pem" -CAkey "$work/ca-key.pem" -CAcreateserial \
    -days "$days" -sha256 -extfile "$work/$1.ext" -out "$work/$1.pem" 2>/dev/null
}
client_ext="basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"

if [ -n "$role" ]; then
  out="$cn-$role"
  for f in ca.pem ca-key.pem; do
    [ -r "$dir/$f" ] || { echo "$dir/$f is missing: --role issues from the CA that the first form made into DIR" >&2; exit 1; }
  done
  for f in "$out.pem" "$out-key.pem"; do
    [ -e "$dir/$f" ] && { echo "$dir/$f exists: refusing to issue it again; nothing was written. Remove it first if you mean to replace it." >&2; exit 1; }
  done
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  umask 077
  cp "$dir/ca.pem" "$dir/ca-key.pem" "$work/"
  sign "$out" "/CN=$cn/OU=$role" "$client_ext"
  mv "$work/$out.pem" "$work/$out-key.pem" "$dir/"
  chmod 0644 "$dir/$out.pem"
  chmod 0600 "$dir/$out-key.pem"
  echo "made in $dir: $out.pem for CN $cn with the role $role (valid $days days); key 0600"
  exit 0
fi

files="ca.pem ca-key.pem frontend.pem frontend-key.pem client.pem client-key.pem ingress.pem ingress-key.pem"
for f in $files; do
  if [ -e "$dir/$f" ]; then
    echo "$dir/$f exists: refusing to make the certificates again, which would replace the CA every certificate in use chains to; nothing was written. Use another DIR, or remove the old files first if you mean to replace them all. To issue one more certificate from this CA: $0 --role ROLE --name NAME $dir" >&2
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

# Everything is made in a scratch directory and moved into DIR at the end,
# so that a failure halfway leaves DIR as it was.
key "$work/ca-key.pem"
openssl req -x509 -new -key "$work/ca-key.pem" -sha256 -days $((2 * days)) -subj "/CN=siteops Temporal CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -out "$work/ca.pem" 2>/dev/null

sign frontend "/CN=temporal-frontend.temporal.svc.cluster.local/OU=admin" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$sans"
sign client "/CN=siteops/OU=worker" "$client_ext"
sign ingress "/CN=siteops-ingress/OU=ingress" "$client_ext"

for f in $files; do
  mv "$work/$f" "$dir/$f"
done
chmod 0644 "$dir/ca.pem" "$dir/frontend.pem" "$dir/client.pem" "$dir/ingress.pem"
chmod 0600 "$dir/ca-key.pem" "$dir/frontend-key.pem" "$dir/client-key.pem" "$dir/ingress-key.pem"

echo "made in $dir: ca.pem (valid $((2 * days)) days), frontend.pem for $sans, client.pem for siteops (role worker), ingress.pem for siteops-ingress (role ingress) (valid $days days); keys 0600"
echo "Keep ca-key.pem offline: it signs every certificate the frontend trusts. The Secrets:"
echo "On-call's and partners' certificates, one each: $0 --role oncall --name alice $dir"
echo "  kubectl -n temporal create secret generic temporal-tls --from-file=tls.crt=$dir/frontend.pem --from-file=tls.key=$dir/frontend-key.pem --from-file=ca.crt=$dir/ca.pem"
echo "  kubectl -n siteops create secret generic siteops-temporal-tls --from-file=tls.crt=$dir/client.pem --from-file=tls.key=$dir/client-key.pem --from-file=ca.crt=$dir/ca.pem"
echo "  kubectl -n siteops create secret generic siteops-ingress-temporal-tls --from-file=tls.crt=$dir/ingress.pem --from-file=tls.key=$dir/ingress-key.pem --from-file=ca.crt=$dir/ca.pem"
