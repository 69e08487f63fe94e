#!/bin/sh
# Sends one delivery as Stripe sends it: the body signed with the endpoint's
# secret (Stripe-Signature: t=<unix time>,v1=<hex HMAC-SHA256 of "t.body">),
# POSTed as application/json. Prints the answer and its HTTP status.
# Usage: sh examples/send_stripe.sh URL SECRET BODY_FILE
set -eu
url=$1 secret=$2 file=$3
t=$(date +%s)
v1=$({ printf '%s.' "$t"; cat "$file"; } | openssl dgst -sha256 -hmac "$secret" | awk '{ print $NF }')
curl -sS -w '\nHTTP %{http_code}\n' -H 'Content-Type: application/json' \
  -H "Stripe-Signature: t=$t,v1=$v1" --data-binary @"$file" "$url"
