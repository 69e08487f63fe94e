-- Included (\i) by the regression tests, which pg_regress runs from the
-- repository root: pg_temp.err(sql) runs a statement
-- and returns its SQLSTATE and message instead of failing, so that a test
-- can show the error code of a misuse.
\set SHOW_CONTEXT never
CREATE FUNCTION pg_temp.err(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE sql;
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
