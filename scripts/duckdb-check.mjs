// duckdb-check reads Parquet files with DuckDB, a reader independent of the
// one that wrote them, and prints what it saw as JSON:
//   {"files":[{"path":..., "rows":N, "columns":[{"name":..., "type":...}],
//              "row_groups":N, "max_row_group_rows":N, "codecs":[...], "encodings":[...]}]}
// With --rows, each file's entry also has "rows_json": every row as DuckDB
// reads it, as JSON, in file order. With --stats, "stats": each column
// chunk's statistics as DuckDB reads them from the footer (row group, column
// path, file_offset, min, max, whether each is exact), and with one or more
// --count-where CLAUSE, "counts": the number of rows each WHERE clause
// selects, so that a test can check that DuckDB's row-group pruning by those
// statistics keeps every matching row.
// Usage: node scripts/duckdb-check.mjs [--rows] [--stats] [--count-where CLAUSE]... FILE.parquet...
// DuckDB comes from .cache/node (scripts/install-test-tools.sh).
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(path.join(root, '.cache', 'node', 'package.json'));
const { DuckDBInstance } = require('@duckdb/node-api');

let withRows = false;
let withStats = false;
const wheres = [];
const files = [];
for (let args = process.argv.slice(2); args.length > 0; ) {
  const arg = args.shift();
  if (arg === '--rows') withRows = true;
  else if (arg === '--stats') withStats = true;
  else if (arg === '--count-where' && args.length > 0) wheres.push(args.shift());
  else files.push(arg);
}
if (files.length === 0) {
  console.error('usage: node scripts/duckdb-check.mjs [--rows] [--stats] [--count-where CLAUSE]... FILE.parquet...');
  process.exit(2);
}

// Paths go into SQL as string literals; double single quotes to escape them.
const lit = (s) => `'${s.replaceAll("'", "''")}'`;

const instance = await DuckDBInstance.create(':memory:');
const conn = await instance.connect();
const out = [];
try {
  for (const file of files) {
    const src = `read_parquet(${lit(path.resolve(file))})`;
    const count = await conn.runAndReadAll(`SELECT count(*)::BIGINT AS n FROM ${src}`);
    const desc = await conn.runAndReadAll(`DESCRIBE SELECT * FROM ${src}`);
    const meta = await conn.runAndReadAll(
      `SELECT count(DISTINCT row_group_id)::BIGINT AS groups,
              coalesce(max(row_group_num_rows), 0)::BIGINT AS max_rows,
              list(DISTINCT compression ORDER BY compression) AS codecs,
              list(DISTINCT encodings ORDER BY encodings) AS encodings
         FROM parquet_metadata(${lit(path.resolve(file))})`);
    const m = meta.getRowObjectsJson()[0];
    let rowsJSON;
    if (withRows) {
      const rows = await conn.runAndReadAll(
        `WITH r AS (SELECT * FROM read_parquet(${lit(path.resolve(file))}, file_row_number = true))
         SELECT to_json(r)::VARCHAR AS j FROM r ORDER BY file_row_number`);
      rowsJSON = rows.getRowObjectsJson().map((r) => r.j);
    }
    let stats;
    if (withStats) {
      const st = await conn.runAndReadAll(
        `SELECT row_group_id::BIGINT AS row_group, path_in_schema AS path, file_offset::BIGINT AS file_offset,
                stats_min_value AS min, stats_max_value AS max, min_is_exact, max_is_exact
           FROM parquet_metadata(${lit(path.resolve(file))}) ORDER BY row_group_id, column_id`);
      stats = st.getRowObjectsJson().map((r) => ({ ...r, row_group: Number(r.row_group), file_offset: Number(r.file_offset) }));
    }
    const counts = [];
    for (const where of wheres) {
      const n = await conn.runAndReadAll(`SELECT count(*)::BIGINT AS n FROM ${src} WHERE ${where}`);
      counts.push(Number(n.getRowObjectsJson()[0].n));
    }
    out.push({
      path: file,
      rows: Number(count.getRowObjectsJson()[0].n),
      columns: desc.getRowObjectsJson().map((r) => ({ name: r.column_name, type: r.column_type })),
      row_groups: Number(m.groups),
      max_row_group_rows: Number(m.max_rows),
      codecs: m.codecs ?? [],
      encodings: m.encodings ?? [],
      rows_json: rowsJSON,
      stats,
      counts: wheres.length > 0 ? counts : undefined,
    });
  }
} catch (err) {
  console.error(`duckdb-check: ${err.message}`);
  process.exit(1);
} finally {
  conn.closeSync();
}
console.log(JSON.stringify({ files: out }, null, 2));
