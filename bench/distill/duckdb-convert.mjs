// duckdb-convert times DuckDB converting a JSONL file to zstd Parquet, the
// reference speed for bench/distill.sh.
// Usage: node bench/distill/duckdb-convert.mjs IN.jsonl OUT.parquet
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const require = createRequire(path.join(root, '.cache', 'node', 'package.json'));
const { DuckDBInstance } = require('@duckdb/node-api');

const [input, output] = process.argv.slice(2);
if (!input || !output) {
  console.error('usage: node bench/distill/duckdb-convert.mjs IN.jsonl OUT.parquet');
  process.exit(2);
}
const lit = (s) => `'${path.resolve(s).replaceAll("'", "''")}'`;

const instance = await DuckDBInstance.create(':memory:');
const conn = await instance.connect();
const start = process.hrtime.bigint();
await conn.run(
  `COPY (SELECT * FROM read_json(${lit(input)}, format = 'newline_delimited'))
     TO ${lit(output)} (FORMAT parquet, COMPRESSION zstd)`);
const seconds = Number(process.hrtime.bigint() - start) / 1e9;
const count = await conn.runAndReadAll(`SELECT count(*)::BIGINT AS n FROM read_parquet(${lit(output)})`);
const rows = Number(count.getRowObjectsJson()[0].n);
conn.closeSync();
console.log(`duckdb: ${rows} rows in ${seconds.toFixed(2)}s: ${Math.round(rows / seconds)} rows/s`);
