#!/bin/bash
# run.sh - the SDK cross-check: every test/sdk/*.mjs script signs deliveries
# with a provider's own SDK (genuine and mutated) and prints one JSON case per
# line with the SDK's own decision; each case is then judged by
# webhook_idem.verify_signature on the server PG* points at, and any case
# decided differently fails the suite.
#
# Run under pg_virtualenv with webhook_idem installed (make sdk does both).
# A case is a JSON object:
#   {"name": "...", "scheme": "...", "secrets": ["..."], "body_b64": "...",
#    "headers": {...}, "url": null, "method": "POST", "at": "<timestamptz>",
#    "tolerance": "5 minutes", "options": {}, "sdk_valid": true,
#    "verdict": "signature_mismatch"}        (verdict optional: the exact reason)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"

# The SDKs come from the npm registry, pinned by package-lock.json.
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
	npm ci --no-audit --no-fund --loglevel=error
fi

cases=$(mktemp)
trap 'rm -f "$cases"' EXIT
scripts=0
for script in "$here"/*.mjs; do
	[ "$(basename "$script")" = cases.mjs ] && continue   # the shared helpers
	node "$script" >>"$cases"
	scripts=$((scripts + 1))
done
echo "sdk: $(wc -l <"$cases") cases from $scripts scripts"

# psql's \copy takes no variables: the file's path is put in the script.
sed "s|@CASES@|$cases|" <<'SQL' | psql -X -q -v ON_ERROR_STOP=1
SET client_min_messages = warning;
DROP DATABASE IF EXISTS sdk_crosscheck;
CREATE DATABASE sdk_crosscheck;
\c sdk_crosscheck
CREATE EXTENSION webhook_idem;
CREATE TABLE cases (n serial, c jsonb);
-- CSV with a quote and a delimiter that never occur: one line, one jsonb.
\copy cases(c) FROM '@CASES@' WITH (FORMAT csv, QUOTE E'\x01', DELIMITER E'\x02')
CREATE TABLE judged AS
SELECT n, c->>'name' AS name, c->>'scheme' AS scheme, (c->>'sdk_valid')::boolean AS sdk_valid,
       c->>'verdict' AS expected,
       webhook_idem.verify_signature(
         c->>'scheme',
         ARRAY(SELECT jsonb_array_elements_text(c->'secrets')),
         decode(c->>'body_b64', 'base64'),
         coalesce(c->'headers', '{}'),
         c->>'url',
         coalesce((c->>'at')::timestamptz, now()),
         coalesce((c->>'tolerance')::interval, '5 minutes'),
         coalesce(nullif(c->'options', 'null'), '{}'),
         coalesce(c->>'method', 'POST')) AS verdict
  FROM cases;
SELECT scheme, count(*) AS cases, count(*) FILTER (WHERE sdk_valid) AS sdk_valid
  FROM judged GROUP BY scheme ORDER BY scheme;
SELECT n, name, scheme, sdk_valid, expected, verdict AS webhook_idem
  FROM judged
 WHERE (verdict = 'valid') IS DISTINCT FROM sdk_valid
    OR (expected IS NOT NULL AND verdict IS DISTINCT FROM expected)
 ORDER BY n;
DO $$
DECLARE bad bigint; total bigint;
BEGIN
  SELECT count(*) FILTER (WHERE (verdict = 'valid') IS DISTINCT FROM sdk_valid
                             OR (expected IS NOT NULL AND verdict IS DISTINCT FROM expected)),
         count(*)
    INTO bad, total FROM judged;
  IF total = 0 THEN
    RAISE EXCEPTION 'sdk: no cases were produced';
  END IF;
  IF bad > 0 THEN
    RAISE EXCEPTION 'sdk: % of % cases decided differently from the provider''s SDK', bad, total;
  END IF;
END
$$;
\c postgres
DROP DATABASE sdk_crosscheck;
SQL
echo "sdk: every case decided as the provider's SDK decides"
