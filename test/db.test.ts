/** The data layer behaves the same on PGlite and PostgreSQL where the code relies on it. */
import pg from 'pg';
import { describe, expect, it, vi } from 'vitest';
import { isRead, prepared, preparedPoolOf, preparedStatements } from '../server/db/prepared.ts';
import { captureStatements } from './helpers/plans.ts';
import { useServer } from './helpers/server.ts';

const server = useServer();

describe('knex results', () => {
  it('delete and update resolve to the affected row count; int8 reads back as number', async () => {
    const knex = server.deps.db.knex;
    const { userId } = await server.user();
    await knex('app_meta').insert([
      { key: 'a', value: '1' },
      { key: 'b', value: '2' },
    ]);
    expect(await knex('app_meta').whereIn('key', ['a', 'b']).update({ value: '3' })).toBe(2);
    expect(await knex('app_meta').whereIn('key', ['a', 'b', 'c']).delete()).toBe(2);
    expect(await knex('app_meta').where({ key: 'missing' }).delete()).toBe(0);
    const account = await knex('accounts').where({ id: userId }).first();
    expect(typeof account.created_at).toBe('number');
    const count = await knex('accounts').count<{ c: unknown }[]>('* as c').first();
    expect(typeof count!.c).toBe('number');
  });
});

describe('named prepared statements (server/db/prepared.ts)', () => {
  const settings = prepared<{ mode: string; names: string[] | null }>(
    'test_prepared_settings',
    "select current_setting('plan_cache_mode') as mode, (select array_agg(name::text order by name) from pg_prepared_statements where name like ?) as names",
  );

  it('run through knex (its query event sees them) and return rows', async () => {
    const knex = server.deps.db.knex;
    const statements = await captureStatements(knex, /test_prepared_settings|pg_prepared_statements/, async () => {
      expect(await settings(knex, ['test_prepared_%'])).toHaveLength(1);
    });
    expect(statements).toEqual([{ sql: settings.text.replace('?', '$1'), bindings: ['test_prepared_%'] }]);
  });

  it("on PostgreSQL: prepared by name, with generic plans outside a transaction and PostgreSQL's choice inside one", async () => {
    const knex = server.deps.db.knex;
    const [outside] = await settings(knex, ['test_prepared_%']);
    const [inside] = await knex.transaction((trx) => settings(trx, ['test_prepared_%']));
    if (server.deps.db.kind === 'postgres') {
      expect(outside).toEqual({ mode: 'force_generic_plan', names: ['test_prepared_settings'] });
      expect(inside).toEqual({ mode: 'auto', names: ['test_prepared_settings'] });
    } else {
      // PGlite: one connection, nothing to save by naming; the same text runs unnamed.
      expect(outside).toEqual({ mode: 'auto', names: null });
      expect(inside).toEqual({ mode: 'auto', names: null });
    }
  });

  it('on PostgreSQL: a statement that writes runs on the main pool outside a transaction, never holding a read connection', async () => {
    const knex = server.deps.db.knex;
    // An upsert in a CTE (as the rate limiter's sync is), reporting the connection's plan mode.
    const write = prepared<{ mode: string }>(
      'test_prepared_write',
      "with w as (insert into app_meta (key, value) values ('test_prepared_write', ?) on conflict (key) do update set value = excluded.value returning value) select current_setting('plan_cache_mode') as mode from w",
    );
    expect(isRead(write.text)).toBe(false);
    expect(isRead(settings.text)).toBe(true);
    const [row] = await write(knex, ['1']);
    expect(row).toEqual({ mode: 'auto' });
    expect(await knex('app_meta').where({ key: 'test_prepared_write' }).first()).toMatchObject({ value: '1' });
    const pool = preparedPoolOf(knex);
    if (!pool) return expect(server.deps.db.kind).toBe('pglite');
    // Every connection of the read pool busy: the write still runs at once.
    const client = pool.client as {
      acquireConnection(): Promise<unknown>;
      releaseConnection(c: unknown): Promise<unknown>;
    };
    const max = (pool.client as { pool: { max: number } }).pool.max;
    const held = await Promise.all(Array.from({ length: max }, () => client.acquireConnection()));
    try {
      const [again] = await write(knex, ['2']);
      expect(again).toEqual({ mode: 'auto' });
    } finally {
      await Promise.all(held.map((c) => client.releaseConnection(c)));
    }
    expect(await knex('app_meta').where({ key: 'test_prepared_write' }).first()).toMatchObject({ value: '2' });
  });

  it("on PostgreSQL: a write outside a transaction goes straight through pg, numbered once, under its name; inside one through knex; a failure keeps PostgreSQL's code and names the statement", async () => {
    const knex = server.deps.db.knex;
    const write = prepared<{ value: string }>(
      'test_prepared_direct_write',
      'insert into app_meta (key, value) values (?, ?) on conflict (key) do update set value = excluded.value returning value',
    );
    const unique = prepared<{ value: string }>(
      'test_prepared_direct_unique',
      'insert into app_meta (key, value) values (?, ?) returning value',
    );
    // The first argument of every pg query: knex's (a callback follows it) and the direct one (a promise).
    const configs: Array<{ text?: string; name?: string; rowMode?: string }> = [];
    const query = pg.Client.prototype.query as (...args: unknown[]) => unknown;
    const spy = vi.spyOn(pg.Client.prototype, 'query').mockImplementation(function (
      this: pg.Client,
      ...args: unknown[]
    ) {
      if (typeof args[0] === 'object' && args[0] !== null) configs.push(args[0] as (typeof configs)[number]);
      return query.apply(this, args) as never;
    });
    let failure: unknown;
    try {
      expect(await write(knex, ['test_direct', 'a'])).toEqual([{ value: 'a' }]);
      expect(await knex.transaction((trx) => write(trx, ['test_direct', 'b']))).toEqual([{ value: 'b' }]);
      failure = await unique(knex, ['test_direct', 'c']).catch((err: unknown) => err);
    } finally {
      spy.mockRestore();
    }
    expect(failure).toMatchObject({ code: '23505', statement: 'test_prepared_direct_unique' });
    expect(await knex('app_meta').where({ key: 'test_direct' }).first()).toMatchObject({ value: 'b' });
    const ours = configs.filter((c) => c.name?.startsWith('test_prepared_direct'));
    // PGlite runs every statement through knex on its own client: none reaches pg.
    if (server.deps.db.kind !== 'postgres') return expect(ours).toEqual([]);
    const numbered = write.text.replace('?', '$1').replace('?', '$2');
    expect(ours.map((c) => [c.name, c.text, c.rowMode ?? 'knex'])).toEqual([
      ['test_prepared_direct_write', numbered, 'array'],
      ['test_prepared_direct_write', numbered, 'knex'],
      ['test_prepared_direct_unique', unique.text.replace('?', '$1').replace('?', '$2'), 'array'],
    ]);
  });

  it('on PostgreSQL: JIT is off on both pools (compiling costs more than these statements run)', async () => {
    const knex = server.deps.db.knex;
    const jit = prepared<{ jit: string }>('test_prepared_jit', "select current_setting('jit') as jit");
    const [prepared_] = await jit(knex, []);
    const main = (await knex.raw("select current_setting('jit') as jit")).rows[0] as { jit: string };
    if (server.deps.db.kind === 'postgres') {
      expect(prepared_).toEqual({ jit: 'off' });
      expect(main).toEqual({ jit: 'off' });
    } else {
      // PGlite carries no JIT provider: nothing is ever compiled, whatever the setting says.
      expect((await knex.raw('select pg_jit_available() as available')).rows[0]).toEqual({ available: false });
    }
  });

  it("on PostgreSQL: pg's arrays of rows are emptied once the rows are objects (they die young; kept, they were promoted)", async () => {
    const knex = server.deps.db.knex;
    const series = prepared<{ n: number }>('test_prepared_series', 'select generate_series(1, ?::int) as n');
    if (!preparedPoolOf(knex)) return expect(server.deps.db.kind).toBe('pglite');
    // Every result pg hands back to a caller awaiting it (the prepared pool's calls; knex passes a callback).
    const results: Array<{ rows: unknown[]; fields: Array<{ name: string }> }> = [];
    const query = pg.Client.prototype.query as (...args: unknown[]) => unknown;
    const spy = vi.spyOn(pg.Client.prototype, 'query').mockImplementation(function (
      this: pg.Client,
      ...args: unknown[]
    ) {
      const out = query.apply(this, args);
      if (out instanceof Promise)
        out.then(
          (r) => results.push(r),
          () => {},
        );
      return out as never;
    });
    try {
      expect(await series(knex, [3])).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
    } finally {
      spy.mockRestore();
    }
    const ours = results.filter((r) => r.fields.map((f) => f.name).join() === 'n');
    expect(ours).toHaveLength(1);
    expect(ours[0]!.rows).toEqual([]);
  });

  it('refuse a name defined twice with other SQL, and names PostgreSQL would not take', () => {
    expect(() => prepared('test_prepared_settings', 'select 1')).toThrow(/defined twice/);
    expect(prepared('test_prepared_settings', settings.text).text).toBe(settings.text);
    expect(() => prepared('Bad-Name', 'select 1')).toThrow(/snake case/);
    expect(preparedStatements().get('test_prepared_settings')).toBe(settings.text);
  });
});
