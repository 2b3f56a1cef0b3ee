/** The data layer behaves the same on PGlite and PostgreSQL where the code relies on it. */
import { describe, expect, it } from 'vitest';
import { useServer } from './helpers/server.ts';

const server = useServer();

describe('knex results', () => {
  it('delete and update resolve to the affected row count; int8 reads back as number', async () => {
    const knex = server.deps.db.knex;
    const { userId } = await server.user();
    await knex('app_meta').insert([{ key: 'a', value: '1' }, { key: 'b', value: '2' }]);
    expect(await knex('app_meta').whereIn('key', ['a', 'b']).update({ value: '3' })).toBe(2);
    expect(await knex('app_meta').whereIn('key', ['a', 'b', 'c']).delete()).toBe(2);
    expect(await knex('app_meta').where({ key: 'missing' }).delete()).toBe(0);
    const account = await knex('accounts').where({ id: userId }).first();
    expect(typeof account.created_at).toBe('number');
    const count = await knex('accounts').count<{ c: unknown }[]>('* as c').first();
    expect(typeof count!.c).toBe('number');
  });
});
