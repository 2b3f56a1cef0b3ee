import type { Knex } from 'knex';

export const name = '0035_front_state_plpgsql';

/**
 * front_state (migration 0030), the front a `front.changed` event carries, filled as each front
 * write commits: the same query, run from PL/pgSQL instead of as a SQL function.
 *
 * - A SQL function that cannot be inlined (this one is a query with CTEs) is parsed and planned
 *   again each time the statement calling it runs: the deferred trigger called it once per front
 *   write, and planning the query cost about three times running it (0.75 ms a call against
 *   0.21 ms from PL/pgSQL, whose plan is kept for the session; a loop of 300 calls on an account
 *   with four members at the front).
 * - front_media_url is declared stable, which it is (convert_to depends on the database's
 *   encoding): a function declared immutable whose body is not is never inlined, so it ran as a
 *   function call per member and URL, its own query planned once per calling statement.
 *
 * The query's text is taken from the catalog, so the front it builds cannot change here.
 */
/** How the query is wrapped: `begin return (<query>); end`. */
const WRAPPING = `prefix text := E'begin\\n  return (';
  suffix text := E');\\nend';
  body text := (select prosrc from pg_proc where oid = 'front_state(uuid)'::regprocedure);`;

const WRAP = `do $$
declare ${WRAPPING}
begin
  execute format('create or replace function front_state(uid uuid) returns jsonb language plpgsql stable as %L',
    prefix || trim(trailing E' \\n\\t;' from body) || suffix);
end $$`;

const UNWRAP = `do $$
declare ${WRAPPING}
begin
  if left(body, length(prefix)) <> prefix or right(body, length(suffix)) <> suffix then
    raise exception 'front_state is not as migration 0035 left it';
  end if;
  body := substr(body, length(prefix) + 1, length(body) - length(prefix) - length(suffix));
  execute format('create or replace function front_state(uid uuid) returns jsonb language sql stable as %L', body);
end $$`;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(WRAP);
  await knex.raw('alter function front_media_url(uuid, text, jsonb) stable');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('alter function front_media_url(uuid, text, jsonb) immutable');
  await knex.raw(UNWRAP);
}
