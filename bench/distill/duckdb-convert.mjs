// duckdb-convert times DuckDB converting a JSONL file of rows to Parquet, the
// reference for bench/distill.sh, at the settings it is given so that both
// sides do the same work: zstd at LEVEL, ROWS rows per row group, THREADS
// threads. DuckDB treats ROWS as a target (its row groups follow its read
// batches), so it prints the row groups it wrote: the benchmark gives ours
// their mean size.
// Usage: node bench/distill/duckdb-convert.mjs IN.jsonl OUT.parquet LEVEL ROWS THREADS
import { createRequire } from 'node:module';
import path from 'node:path';
import { open } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const require = createRequire(path.join(root, '.cache', 'node', 'package.json'));
const { DuckDBInstance } = require('@duckdb/node-api');

const [input, output, level, rowGroup, threads] = process.argv.slice(2);
const ints = [level, rowGroup, threads].map((s) => Number.parseInt(s, 10));
if (!input || !output || ints.some((n) => !Number.isInteger(n) || n < 1)) {
  console.error('usage: node bench/distill/duckdb-convert.mjs IN.jsonl OUT.parquet LEVEL ROWS THREADS');
  process.exit(2);
}
const [lvl, rows, nthreads] = ints;
const lit = (s) => `'${path.resolve(s).replaceAll("'", "''")}'`;

// The rows' columns (distill.Row's JSON), given to read_json as ours has them
// compiled in: left to infer them, DuckDB parses a sample of up to 20,480
// rows once more only to learn the schema. The first line's keys must be
// exactly these, so that a new field of Row cannot be dropped unnoticed.
const message = 'STRUCT(role VARCHAR, content VARCHAR)[]';
const columns = {
  id: 'VARCHAR', prompt: message, completion: message, kind: 'VARCHAR', source: 'VARCHAR',
  task_id: 'VARCHAR', step: 'BIGINT', guideline_id: 'VARCHAR', teacher_model: 'VARCHAR',
  input_tokens: 'BIGINT', output_tokens: 'BIGINT', compression_ratio: 'DOUBLE', split: 'VARCHAR',
};
const first = await firstLine(input);
const keys = Object.keys(JSON.parse(first)).sort().join(',');
if (keys !== Object.keys(columns).sort().join(',')) {
  console.error(`duckdb-convert: ${input}: line 1 has the keys ${keys}; this script's columns are ${Object.keys(columns).sort().join(',')}: update them`);
  process.exit(2);
}
const columnsSQL = '{' + Object.entries(columns).map(([k, t]) => `'${k}': '${t}'`).join(', ') + '}';

const instance = await DuckDBInstance.create(':memory:', { threads: String(nthreads) });
const conn = await instance.connect();
const start = process.hrtime.bigint();
await conn.run(
  `COPY (SELECT * FROM read_json(${lit(input)}, format = 'newline_delimited', columns = ${columnsSQL}))
     TO ${lit(output)} (FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL ${lvl}, ROW_GROUP_SIZE ${rows})`);
const seconds = Number(process.hrtime.bigint() - start) / 1e9;
const meta = await conn.runAndReadAll(
  `SELECT count(DISTINCT row_group_id)::BIGINT AS groups FROM parquet_metadata(${lit(output)})`);
const m = meta.getRowObjectsJson()[0];
const count = await conn.runAndReadAll(`SELECT count(*)::BIGINT AS n FROM read_parquet(${lit(output)})`);
const n = Number(count.getRowObjectsJson()[0].n);
conn.closeSync();
const groups = Number(m.groups);
console.log(`duckdb: ${n} rows in ${seconds.toFixed(2)}s: ${Math.round(n / seconds)} rows/s ` +
  `(${groups} row groups, mean ${Math.round(n / groups)} rows, zstd level ${lvl}, ${nthreads} threads)`);

// firstLine reads the first line of a file (up to 16 MiB).
async function firstLine(file) {
  const fh = await open(file, 'r');
  try {
    const buf = Buffer.alloc(16 << 20);
    const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
    const text = buf.subarray(0, bytesRead).toString('utf8');
    const nl = text.indexOf('\n');
    return nl < 0 ? text : text.slice(0, nl);
  } finally {
    await fh.close();
  }
}
