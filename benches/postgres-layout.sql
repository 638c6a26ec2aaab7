-- Issue 40: a table per namespace vs one shared table with the namespace in
-- the key, server side only (psql URL -X -f benches/postgres-layout.sql).
-- Results in benches/README.md ("PostgreSQL, round two").
\timing on
DROP TABLE IF EXISTS shared;
DO $$ BEGIN FOR p IN 0..15 LOOP EXECUTE format('DROP TABLE IF EXISTS t_p%s', p); EXECUTE format('CREATE TABLE t_p%s (k bytea PRIMARY KEY, v bytea NOT NULL)', p); END LOOP; END $$;
CREATE TABLE shared (k bytea PRIMARY KEY, v bytea NOT NULL);
\echo == write: a table per partition (16 x 50,000 rows, 1,000-row statements, partitions interleaved)
DO $$ BEGIN FOR b IN 0..49 LOOP FOR p IN 0..15 LOOP EXECUTE format('INSERT INTO t_p%s SELECT convert_to(''r procs '' || md5((%s*1000+i)::text), ''UTF8''), convert_to(repeat(''x'',74),''UTF8'') FROM generate_series(0,999) i', p, b); END LOOP; END LOOP; END $$;
\echo == write: one shared table, namespace in the key (same rows)
DO $$ BEGIN FOR b IN 0..49 LOOP FOR p IN 0..15 LOOP EXECUTE format('INSERT INTO shared SELECT convert_to(''p%s:r procs '' || md5((%s*1000+i)::text), ''UTF8''), convert_to(repeat(''x'',74),''UTF8'') FROM generate_series(0,999) i', p, b); END LOOP; END LOOP; END $$;
VACUUM ANALYZE;
\echo == point reads, 50,000 keys of one partition: own table
SELECT count(*) FROM generate_series(0,49999) i JOIN t_p7 ON k = convert_to('r procs ' || md5(i::text),'UTF8');
\echo == point reads, 50,000 keys of one partition: shared table
SELECT count(*) FROM generate_series(0,49999) i JOIN shared ON k = convert_to('p7:r procs ' || md5(i::text),'UTF8');
\echo == scan of a whole partition: own table
SELECT count(*) FROM t_p7 WHERE k >= '\x'::bytea;
\echo == scan of a whole partition: shared table
SELECT count(*) FROM shared WHERE k >= convert_to('p7:','UTF8') AND k < convert_to('p7;','UTF8');
\echo == size: 16 tables vs shared (bytes)
SELECT sum(pg_total_relation_size(format('t_p%s', p))) FROM generate_series(0,15) p;
SELECT pg_total_relation_size('shared');
\echo == dropping a partition: own table (DROP TABLE) vs shared (DELETE its range)
DROP TABLE t_p7;
DELETE FROM shared WHERE k >= convert_to('p7:','UTF8') AND k < convert_to('p7;','UTF8');
