/** The SQL seam: the `sql` tag (server/db/sql.ts) and the statement registry (server/db/statements.ts). */
import { describe, expect, it } from 'vitest';
import { isSql, sql, toKnex, toNative } from '../server/db/sql.ts';
import { isRead } from '../server/db/prepared.ts';
import { paramsKey, registeredStatements, statement } from '../server/db/statements.ts';
import { violations } from '../scripts/sql-rules.ts';

describe('the sql tag', () => {
  it('binds each value at its position, and a nested fragment brings its values along in place', () => {
    const visible = sql`m.kind = ${'member'} and m.level >= ${2}`;
    const q = sql`select m.id from members m where m.user_id = ${'owner'} and ${visible} limit ${10}`;
    expect(toNative(q)).toEqual({
      text: 'select m.id from members m where m.user_id = $1 and m.kind = $2 and m.level >= $3 limit $4',
      values: ['owner', 'member', 2, 10],
    });
    // Moving the fragment moves its values with it: no order of values to keep by hand.
    const moved = sql`select m.id from members m where ${visible} and m.user_id = ${'owner'} limit ${10}`;
    expect(toNative(moved).values).toEqual(['member', 2, 'owner', 10]);
  });

  it('gives knex ? placeholders and escapes a literal ? of the text', () => {
    expect(toKnex(sql`select ${1} where j ? 'k'`)).toEqual({ sql: "select ? where j \\? 'k'", bindings: [1] });
  });

  it('takes identifiers only through sql.id, which refuses anything but plain lower-case names', () => {
    expect(toNative(sql`select ${sql.id('m.id')} from ${sql.id('members')} m`).text).toBe('select m.id from members m');
    for (const bad of ['m.id; drop table members', 'M.id', '"m"', 'a.b.c', '', 'm id'])
      expect(() => sql.id(bad), bad).toThrow(/not a plain identifier/);
  });

  it('takes constant text only from a closed list', () => {
    expect(toNative(sql`order by x ${sql.constant('desc', ['asc', 'desc'])}`).text).toBe('order by x desc');
    expect(() => sql.constant('desc; drop', ['asc', 'desc'] as string[])).toThrow(/not one of the allowed/);
  });

  it('joins fragments, leaves the empty fragment out, and carries the marks of every piece up', () => {
    const a = sql.mark(sql`a = ${1}`, 'needs:a');
    const b = sql`b = ${2}`;
    const joined = sql`where ${sql.join([a, b], ' and ')}${sql.empty}`;
    expect(toNative(joined)).toEqual({ text: 'where a = $1 and b = $2', values: [1, 2] });
    expect([...joined.marks]).toEqual(['needs:a']);
    expect(toNative(sql.join([], ', ')).text).toBe('');
    expect(isSql(joined)).toBe(true);
    expect(isSql({ strings: [''], values: [] })).toBe(false);
  });

  it('binds arrays and objects as one value each (never spread into the text)', () => {
    const q = sql`where id = any (${['a', 'b']}::uuid[]) and data = ${{ x: 1 }}`;
    expect(toNative(q)).toEqual({ text: 'where id = any ($1::uuid[]) and data = $2', values: [['a', 'b'], { x: 1 }] });
  });
});

describe('the statement registry', () => {
  it('tells reads (the generic-plan pool) from statements that write, lock or act (the main pool)', () => {
    for (const read of [
      'select m.id from members m where m.user_id = $1 order by m.updated_at desc',
      'with x as (select 1 as n) select n from x',
      '  SELECT 1',
    ])
      expect(isRead(read), read).toBe(true);
    for (const effect of [
      'insert into t (a) values ($1)',
      'update t set a = $1',
      'delete from t where a = $1',
      'with w as (insert into t (a) values ($1) returning a) select a from w',
      'with d as (delete from t returning a) select count(*) from d',
      'select id from t where id = $1 for update',
      'select id from t for no key update',
      'select id from t for key share',
      'select pg_notify($1, $2)',
      'select pg_advisory_xact_lock($1)',
      "select nextval('s')",
      'vacuum analyze t',
    ])
      expect(isRead(effect), effect).toBe(false);
  });

  it('names each text of a statement after its variants, and refuses a text its variants do not list', async () => {
    const probe = statement<{ cursor?: number }, { n: number }>({
      name: 'test_registry_probe',
      area: 'test',
      variants: { 'first page': {}, 'after a cursor': { cursor: 1 } },
      build: ({ cursor }) => sql`select 1 as n${cursor === undefined ? sql.empty : sql` where 1 > ${cursor}`}`,
    });
    const texts = registeredStatements().find((s) => s.name === 'test_registry_probe')!;
    expect(texts.texts.map((t) => [t.preparedName, t.labels, t.text])).toEqual([
      ['test_registry_probe_1', ['first page'], 'select 1 as n'],
      ['test_registry_probe_2', ['after a cursor'], 'select 1 as n where 1 > $1'],
    ]);
    const unlisted = statement<{ extra: boolean }, unknown>({
      name: 'test_registry_unlisted',
      area: 'test',
      variants: { plain: { extra: false } },
      build: ({ extra }) => (extra ? sql`select 2` : sql`select 1`),
    });
    await expect(unlisted({} as never, { extra: true })).rejects.toThrow(/none of its variants/);
    expect(probe.definition.name).toBe('test_registry_probe');
  });

  it('a statement with a cache builds each distinct parameters once, keeps the most recently run, and binds a copy of the values', async () => {
    let builds = 0;
    const bound: unknown[][] = [];
    // Runs on a stand-in for knex: what the statement would send, without a database.
    const db = {
      raw: (_text: string, bindings: unknown[]) => {
        bound.push(bindings);
        return { options: () => Promise.resolve({ rows: [] }) };
      },
    } as never;
    const read = statement<{ owner: string; ids?: string[]; at?: Date }, unknown>({
      name: 'test_registry_cached',
      area: 'test',
      cache: 2,
      variants: { one: { owner: 'o' } },
      build: ({ owner }) => {
        builds++;
        return sql`select ${owner}::text as owner`;
      },
    });
    await read(db, { owner: 'a' });
    builds = 0; // the first run also built the variants' texts (compile)
    await read(db, { owner: 'a' });
    expect(builds).toBe(0);
    (bound[0] as unknown[]).push('changed by whoever ran it');
    await read(db, { owner: 'a' });
    expect(bound[2]).toEqual(['a']);
    await read(db, { owner: 'b' });
    expect(builds).toBe(1);
    expect(bound.at(-1)).toEqual(['b']);
    await read(db, { owner: 'a' }); // a hit: now the most recently run
    await read(db, { owner: 'c' }); // the third: b, the least recently run, goes
    expect(builds).toBe(2);
    await read(db, { owner: 'a' });
    expect(builds).toBe(2);
    await read(db, { owner: 'b' });
    expect(builds).toBe(3);
    // Parameters that are not plain data are built every time.
    await read(db, { owner: 'a', at: new Date(0) });
    await read(db, { owner: 'a', at: new Date(0) });
    expect(builds).toBe(5);
  });

  it('keys parameters by their plain data, and refuses what is not plain data', () => {
    const keys = [
      paramsKey({ a: '1' }),
      paramsKey({ a: 1 }),
      paramsKey({ a: true }),
      paramsKey({ a: null }),
      paramsKey({ a: undefined }),
      paramsKey({}),
      paramsKey({ a: ['1'] }),
      paramsKey({ a: [1] }),
      paramsKey({ a: { b: '1' } }),
      paramsKey({ b: '1' }),
      paramsKey({ a: '1,' }),
      paramsKey({ a: 'u' }),
      paramsKey(['1', '2']),
      paramsKey(['1,2']),
    ];
    expect(keys.every((k) => typeof k === 'string')).toBe(true);
    expect(new Set(keys).size).toBe(keys.length);
    expect(paramsKey({ a: [{ b: 'x' }] })).toBe(paramsKey({ a: [{ b: 'x' }] }));
    expect(paramsKey(Object.assign(Object.create(null), { a: 'x' }))).toBe(paramsKey({ a: 'x' }));
    class Access {
      ownerId = 'x';
    }
    for (const value of [
      { a: new Set(['x']) },
      { a: new Map() },
      { a: new Date(0) },
      new Access(),
      { a: Number.NaN },
      { a: Number.POSITIVE_INFINITY },
      { a: () => 1 },
      { a: 1n },
      { a: Symbol('x') },
      [new Set()],
    ])
      expect(paramsKey(value)).toBeUndefined();
  });

  it('refuses a name defined twice and names that are not lower snake case', () => {
    const definition = { name: 'test_registry_twice', area: 'test', variants: { a: {} }, build: () => sql`select 1` };
    statement(definition);
    expect(() => statement({ ...definition })).toThrow(/defined twice/);
    expect(() => statement({ ...definition, name: 'Bad-Name' })).toThrow(/lower-case snake case/);
  });
});

describe('the rules of the SQL seam (npm run lint:sql)', () => {
  const file = (path: string, text: string) => ({ path, text });

  it('hold for the server as it is', () => {
    expect(violations()).toEqual([]);
  });

  it('find each kind of violation', () => {
    const found = violations([
      file('server/features/a/repo.ts', "await db.raw('select 1 where x = ?', { bindings: [x] });"),
      file('server/features/a/other.ts', `await knex.whereRaw(\`x = $\{value}\`);`),
      file(
        'server/features/a/service.ts',
        "import knex from 'knex';\nconst rows = await ctx.db('members').select('id');",
      ),
      file('server/features/a/jobs.ts', 'await db.transaction(async (trx) => work(trx));'),
      file('server/features/a/index.ts', "export { membersRepo } from './repo.ts';"),
      file('server/features/b/service.ts', "import { x } from '../c/index.ts';"),
      file('server/features/c/service.ts', "import { y } from '../b/index.ts';"),
      file('server/storage/thing.ts', "await db('staged_uploads').delete();"),
      file('server/http/store.ts', 'await this.db.raw<{ rows: Array<{ n: number }> }>(text);'),
      file('server/db/knex.ts', "await db.raw('select 1', { bindings: [] });"),
    ]);
    expect(found).toEqual([
      'area-cycle: b ↔ c',
      'bindings-array: server/features/a/repo.ts',
      'db-transaction: server/features/a/jobs.ts',
      'index-exports-repo: server/features/a/index.ts',
      'sql-in-service: server/features/a/service.ts (imports knex)',
      'sql-in-service: server/features/a/service.ts (query builder)',
      'sql-interpolation: server/features/a/other.ts',
      'unnamed-sql: server/features/a/repo.ts',
      'unnamed-sql: server/features/a/service.ts',
      'unnamed-sql: server/http/store.ts',
      'unnamed-sql: server/storage/thing.ts',
    ]);
  });
});
