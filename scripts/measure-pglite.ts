/**
 * How to wire the embedded database: knex-pglite (knex talks to PGlite in-process) versus
 * pglite-socket (PGlite behind a loopback PostgreSQL socket, reached with the ordinary `pg`
 * driver). Same workload on both: single-row inserts, indexed page reads, small transactions.
 *
 *   npx tsx scripts/measure-pglite.ts
 */
import knexFactory, { type Knex } from 'knex';
import ClientPGLite from 'knex-pglite';
import { PGlite, types } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import pg from 'pg';

pg.types.setTypeParser(20, (v: string) => Number(v));

async function workload(knex: Knex): Promise<Record<string, string>> {
  await knex.raw(
    'create table t (id uuid primary key default gen_random_uuid(), user_id uuid not null, n bigint not null, body text)',
  );
  await knex.raw('create index t_user_n on t (user_id, n)');
  const user = crypto.randomUUID();
  const time = async (count: number, fn: (i: number) => Promise<unknown>) => {
    const start = performance.now();
    for (let i = 0; i < count; i++) await fn(i);
    return ((performance.now() - start) / count).toFixed(3);
  };
  const insert = await time(1000, (i) => knex('t').insert({ user_id: user, n: i, body: 'x'.repeat(100) }));
  const page = await time(3000, () => knex('t').where({ user_id: user }).orderBy('n', 'desc').limit(20));
  const tx = await time(500, (i) =>
    knex.transaction(async (trx) => {
      await trx('t').where({ user_id: user }).first();
      await trx('t').insert({ user_id: user, n: 10_000 + i });
    }),
  );
  return { 'insert ms/op': insert, 'page read ms/op': page, 'transaction ms/op': tx };
}

const results: Record<string, Record<string, string>> = {};
{
  const pglite = await PGlite.create({ parsers: { [types.INT8]: (v: string) => Number(v) } });
  const knex = knexFactory({ client: ClientPGLite, connection: { pglite } as never });
  results['knex-pglite'] = await workload(knex);
  await knex.destroy();
}
{
  const db = await PGlite.create();
  const server = new PGLiteSocketServer({ db, port: 0, host: '127.0.0.1' });
  await server.start();
  const knex = knexFactory({
    client: 'pg',
    connection: `postgres://postgres@${server.getServerConn()}/postgres`,
    pool: { min: 1, max: 1 },
  });
  results['pglite-socket + pg'] = await workload(knex);
  await knex.destroy();
  await server.stop();
  await db.close();
}
console.table(results);
