/**
 * The bench's independent baseline: the owner reads and the writes of the bench answered by plain
 * `node:http` + `pg`, sharing no code with the server (no express, no knex, no services, no pino).
 * Each request is one named prepared statement. A read selects only the columns the answer needs
 * (rows in array mode, mapped in JS into exactly the server's JSON, key order included). A write is
 * one statement of data-modifying CTEs run in autocommit, doing the server's work with its rules
 * (see WRITE_SQL): checks, rows, and the event appended to `events` with its webhook deliveries and
 * jobs under the log's advisory lock. `npm run bench` checks that the two servers answer alike
 * (bodies, and for writes what they wrote) before it measures them against each other.
 *
 * It does the per-request duties the server does (server/http/pipeline.ts and friends), written
 * out by hand: request id (echoed or generated) and the X-Request-Id header; bearer API key → the
 * key's account and scopes through an in-process cache (API_KEY_CACHE_TTL_MS, default 5 s; a miss
 * is one lookup by the key's SHA-256; key use recorded in one batched UPDATE every 15 s); the rate
 * limit counted in-process and synced to `rate_limit_windows` like the server's PostgreSQL store
 * (first request of a window at once, then one upsert per key every 100 ms; exact near the limit)
 * with the RateLimit-* headers; the scope check (read, or read_write for a write); the query
 * parameters the bench sends, validated; a write's JSON body read (415, 413 past 1 MiB), checked
 * for NUL characters and lone surrogates and validated against the contract's rules for it, with
 * the server's 400 (`details` included); one JSON log line per request, formatted as the server's
 * request log and written to stdout.
 * Not done: metrics (prom-client), CORS, 405 for a known path's other methods, contract validation
 * of other parameters, other routes. Of the writes: Idempotency-Key, a note with external images
 * (re-hosted by the server), and a message with links (link previews queued), attachments, a GIF, a
 * reply or a clientMutationId answer 501 NOT_IMPLEMENTED; preset ids (fixture mode) are not taken.
 * Under concurrency its writes are looser than the server's in the way WRITE_SQL's comment says
 * (the front state in `front.changed`).
 *
 * Routes: GET /api/v1/front, /api/v1/entries?limit, /api/v1/members/page?limit&cursor,
 * /api/v1/front/history?limit&cursorStartedAt&cursorId; POST /api/v1/entries, POST /api/v1/front/members,
 * DELETE /api/v1/front/members/{memberId}, POST /api/v1/messaging/channels/{channelId}/messages;
 * and /healthz.
 *
 * Env: DATABASE_URL (its application_name is how the bench finds this server's backends), PORT,
 * HOST, DB_POOL_MAX (10), RATE_LIMIT_PER_MINUTE (1000), API_KEY_CACHE_TTL_MS (5000),
 * MESSAGE_ENCRYPTION_KEYS (as the server's: the first key seals new messages), NOTE_CAP_FREE,
 * NOTE_CAP_PRO, NOTE_CAP_PRO_PLUS (100, 1000, 10000), LOG_LEVEL
 * (`silent` turns the log line off), SQL_CAPTURE_FILE (every statement appended as a JSON line,
 * as the server does, so the bench can count and EXPLAIN them).
 */
import { createCipheriv, createHash, randomBytes, randomUUID } from 'node:crypto';
import { appendFileSync, writeSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { hostname } from 'node:os';
import pg from 'pg';
import type { components } from '../../generated/api.d.ts';

type Schemas = components['schemas'];
type Member = Schemas['Member'];
type Summary = Schemas['EntryListRow']['members'][number];

const env = process.env;
const POOL_MAX = Number(env.DB_POOL_MAX ?? 10);
const RATE_LIMIT = Number(env.RATE_LIMIT_PER_MINUTE ?? 1000);
const KEY_TTL_MS = Number(env.API_KEY_CACHE_TTL_MS ?? 5000);
const CAPTURE = env.SQL_CAPTURE_FILE;
const LOGGING = (env.LOG_LEVEL ?? 'info') !== 'silent';
const WINDOW_MS = 60_000;

// ---------------------------------------------------------------- database

const INT8 = 20;
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8 ? Number : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};
/**
 * Generic plans from the first execution: each statement is planned once per connection, and
 * the plan that runs is the one the bench EXPLAINs as the generic plan (and checks for index use).
 * Left to choose, PostgreSQL kept re-planning the notes and history statements on every execution
 * (custom plans, ~0.5-0.6 ms of planning each on the full-size data, more than running them),
 * because their generic plans' estimates looked dearer; the generic plans ran in half the time.
 * JIT is off, as on the server's connections (server/db/knex.ts).
 */
const pool = new pg.Pool({
  connectionString: env.DATABASE_URL,
  max: POOL_MAX,
  idleTimeoutMillis: 30_000,
  types,
  options: '-c jit=off -c plan_cache_mode=force_generic_plan',
});

type Row = unknown[];

/** One named prepared statement (parsed and planned once per connection), rows as arrays. */
async function run(name: string, text: string, values: unknown[]): Promise<Row[]> {
  if (CAPTURE) {
    // A bytea value as PostgreSQL's hex text, so that the bench can EXPLAIN the statement with it.
    const bindings = values.map((v) => (Buffer.isBuffer(v) ? `\\x${v.toString('hex')}` : v));
    appendFileSync(CAPTURE, JSON.stringify({ sql: text, bindings }) + '\n');
  }
  const result = await pool.query<Row>({ name, text, values, rowMode: 'array' });
  return result.rows;
}

/** The media URL version: the first 12 hex digits of SHA-256(etag or URL), computed where the row is. */
const mediaVersion = (column: string) =>
  `substr(encode(sha256(convert_to(case ${column}->>'source' when 'object' then ${column}->>'etag' else ${column}->>'url' end, 'UTF8')), 'hex'), 1, 12)`;

const MEMBER_COLUMNS = `m.id, m.side_system_id, m.sub_system_id, m.directory_id, m.name, m.display_name, m.pronouns, m.description,
  ${mediaVersion('m.avatar')}, ${mediaVersion('m.banner')}, m.about_tags, m.profile_style, m.archived_at, m.created_at, m.updated_at, m.version`;
const SUMMARY_COLUMNS = `m.id as summary_id, m.name, m.display_name, m.archived_at, ${mediaVersion('m.avatar')} as avatar_v`;

/**
 * Rows of `table` in the active read scope of account c (the unified view, or the active side
 * system and, when set, sub system), ordered by `order`, at most `limit`. The scope is a filter
 * on a walk of the account's ordered index (user_id, <order>), never an index condition: the
 * scope's side system comes from the context row, so the planner cannot know how many rows it
 * holds, and a cached generic plan estimates a handful (it does not know that a side system
 * belongs to one account) — with the side system in the index condition it then reads the whole
 * side system unordered and sorts it (200,000 notes of the large account, per request). Walking
 * the account's rows in order stops after `limit` rows in scope; that is exact when the scope
 * holds most of the account's rows, as in the bench (one side system), and reads past other
 * scopes' rows when it does not.
 */
function scoped(table: string, columns: string, extra: string, order: string, limit: string): string {
  return `select ${columns} from ${table} x
    where x.user_id = c.user_id and x.deleted_at is null${extra}
      and (c.is_unified_view or (x.side_system_id = c.side_system_id and (c.sub_system_id is null or x.sub_system_id = c.sub_system_id)))
    order by ${order} limit ${limit}`;
}

// ---------------------------------------------------------------- write statements

/**
 * The event log's append, as the server's log defines it (server/events/log.ts; the contract is in
 * docs/events.md): the CTEs `locked`, `appended`, `delivered` and `queued` for the event rows of
 * the CTE `source` (account_id, type, area, occurred_at, actor, data), no row when the write did
 * not happen. The transaction-scoped advisory lock on 'event log' is taken before the rows get
 * their ids (the insert reads `locked` first) and held to commit, so appends commit in id order; each
 * event is queued for the account's enabled webhooks that take its type and area (a delivery row
 * each), with one `webhook_deliver` job per webhook unless one is pending or running already.
 */
function appendEvent(source: string): string {
  return `locked as (select pg_advisory_xact_lock(hashtextextended('event log', 0)) from ${source}),
  appended as (
    insert into events (account_id, type, area, occurred_at, actor, data, about_account_id)
    select e.account_id, e.type, e.area, e.occurred_at, e.actor, e.data, null from locked, ${source} e
    returning id, account_id, type, area, occurred_at),
  delivered as (
    insert into webhook_deliveries (webhook_id, event_id, message_id, type, state, next_attempt_at, created_at)
    select w.id, e.id, e.id::text, e.type, 'pending', e.occurred_at, e.occurred_at
    from appended e join webhooks w on w.user_id = e.account_id and w.enabled and e.type = any(w.types) and e.area = any(w.areas)
    order by e.id, w.id
    returning webhook_id, next_attempt_at),
  queued as (
    insert into jobs (id, queue, payload, key, state, attempts, max_attempts, run_after, created_at, updated_at)
    select gen_random_uuid(), 'webhook_deliver', jsonb_build_object('webhookId', d.webhook_id), 'webhook:' || d.webhook_id,
      'pending', 0, 5, d.at, d.at, d.at
    from (select webhook_id, min(next_attempt_at) as at from delivered group by webhook_id) d
    on conflict (queue, key) where key is not null and state in ('pending', 'running') do nothing)`;
}

/**
 * Lock order, as the server's: the account's front lock first (front writes), then row locks and
 * writes, then the log's lock (the server's append is its transaction's last statement). The log's
 * lock is the CTE `locked`, read from the event row, so it is taken after the rows are written;
 * the front lock is the account's counter row (frontLock: front_session_counts, migration 0030, as
 * the server's), which the front statements' locking and writing CTEs wait for
 * (`and exists (select 1 from front_locked)`, a one-time filter evaluated before their scans). A different order deadlocks against the
 * server's transactions on the same data (the bench's pairs overlap at their seams): taken
 * without the front lock, a start held the log's lock and waited at its end (the front-session
 * counter's trigger) for the counter row of a server start that was waiting for the log's lock.
 */
const frontLock = (step: 0 | 1) => `front_locked as (
    insert into front_session_counts as c (user_id, next_position) values ($1::uuid, ${step})
    on conflict (user_id) do update set next_position = c.next_position + ${step}
    returning c.next_position - ${step} as position)`;
const AFTER_FRONT_LOCK = 'exists (select 1 from front_locked)';

/** After appendEvent's CTEs, as a column: the commit-time notification the event streams wait for (null when nothing was appended). */
const NOTIFY = `(select pg_notify('events', case when exists (select 1 from delivered) then 'webhooks' else '' end)::text from appended limit 1)`;

/**
 * Where new rows go (the server's resolveWriteScope): the stored active side system and sub system,
 * share-locked with the context row until commit, so a concurrent delete of either waits for the
 * write (or finishes first, and the write finds no scope: a 500, as on the server).
 */
const writeScope = (
  after = '',
) => `ctx as (select side_system_id, sub_system_id from active_system_context where user_id = $1::uuid${after} for share),
  side as (select id from side_systems where id = (select side_system_id from ctx) and user_id = $1::uuid and deleted_at is null for share),
  sub as (select id from sub_systems where id = (select sub_system_id from ctx) and user_id = $1::uuid and deleted_at is null for share),
  scope as (select c.side_system_id, c.sub_system_id from ctx c
    where exists (select 1 from side) and (c.sub_system_id is null or exists (select 1 from sub)))`;

const mediaUrlSql = (id: string, column: string, kind: 'avatar' | 'banner') =>
  `case when ${mediaVersion(column)} is null then null else '/api/v1/members/' || ${id} || '/media?kind=${kind}&v=' || ${mediaVersion(column)} end`;

/**
 * `front_state(state)`: the front as GET /front answers it (the `front.changed` event's data is the
 * whole front after the write), built as jsonb from the open sessions of the CTE `open_now` (id,
 * member_id, started_at, note, position) whose members are not in the trash, in front order, and
 * the tier presence of members not in the trash.
 */
const FRONT_STATE = (() => {
  const order = 'order by o.position asc nulls last, o.started_at, o.id';
  const member = `jsonb_build_object('_id', m.id, 'userId', m.user_id, 'sideSystemId', m.side_system_id, 'subSystemId', m.sub_system_id,
      'directoryId', m.directory_id, 'name', m.name, 'displayName', coalesce(m.display_name, ''), 'pronouns', coalesce(m.pronouns, ''),
      'description', coalesce(m.description, ''), 'avatarUrl', ${mediaUrlSql('m.id', 'm.avatar', 'avatar')},
      'backgroundUrl', ${mediaUrlSql('m.id', 'm.banner', 'banner')}, 'aboutTags', m.about_tags, 'profileStyle', m.profile_style,
      'archivedAt', m.archived_at, 'createdAt', m.created_at, 'updatedAt', m.updated_at, 'version', m.version)`;
  const session = `jsonb_build_object('_id', o.id, 'userId', m.user_id, 'memberId', o.member_id, 'startedAt', o.started_at)
      || case when o.note is null then '{}'::jsonb else jsonb_build_object('note', o.note) end`;
  return `front_state as (
    select jsonb_build_object(
      'memberIds', coalesce(jsonb_agg(o.member_id ${order}), '[]'::jsonb),
      'members', coalesce(jsonb_agg(${member} ${order}), '[]'::jsonb),
      'activeSessions', coalesce(jsonb_agg(${session} ${order}), '[]'::jsonb),
      'primaryMemberId', (array_agg(o.member_id ${order}))[1],
      'primaryNote', (array_agg(o.note ${order}))[1],
      'tieredPresence', (
        select coalesce(jsonb_agg(jsonb_build_object('memberId', p.member_id, 'tierKey', p.tier_key,
            'tierDisplayName', case p.tier_key when 'coFront' then 'Co-front' when 'coConscious' then 'Co-conscious' else coalesce(t.display_name, p.tier_key) end,
            'note', p.note) order by p.created_at, p.member_id), '[]'::jsonb)
        from front_tier_presence p
          join members pm on pm.id = p.member_id and pm.user_id = $1::uuid and pm.deleted_at is null
          left join front_custom_tiers t on t.user_id = p.user_id and t.id::text = p.tier_key
        where p.user_id = $1::uuid)) as state
    from open_now o join members m on m.id = o.member_id and m.user_id = $1::uuid and m.deleted_at is null)`;
})();

/** The open sessions of account $1 in the statement's snapshot, as `open_now` takes them. */
const OPEN_SESSIONS = `select s.id, s.member_id, s.started_at, s.note, s.position from front_sessions s
    where s.user_id = $1::uuid and s.ended_at is null and s.deleted_at is null`;

/** The event row of the CTE `event`, from one row of `from` (no row: no event). */
const eventRow = (type: string, area: string, now: string, actor: string, data: string, from: string) =>
  `event as (select $1::uuid as account_id, '${type}'::text as type, '${area}'::text as area, ${now}::bigint as occurred_at,
    ${actor}::jsonb as actor, ${data} as data from ${from})`;

/**
 * Concurrency, and where the baseline is looser than the server. Each write is one statement in
 * its own transaction (autocommit) under READ COMMITTED, so everything it reads comes from the
 * snapshot taken when the statement starts: a row lock it waits for inside the statement (FOR
 * UPDATE / FOR SHARE, or an UPDATE) hands it the newest version of the locked row only, never rows
 * that the transaction it waited for inserted, and a count or a max() in the same statement does
 * not see them. So, as the server's statements do (docs/data-access.md, "Writes in one statement"):
 * - the note cap is decided on the members' counter rows (member_note_counts, migration 0029):
 *   `update … where live < cap`, which PostgreSQL re-checks on the newest row version;
 * - front positions come from the account's counter row (front_session_counts.next_position,
 *   migration 0030), which is also the front lock. Where the baseline is looser: the front state
 *   in its `front.changed` is built in the statement, from its snapshot, so it leaves out a start
 *   or stop committed by a request the statement waited for (the server's is filled as the
 *   transaction commits, by migration 0030's deferred trigger). One open session per member holds
 *   as on the server: the partial unique index front_sessions_one_open, with ON CONFLICT DO NOTHING;
 * - the message sequence is exact: seq is `last_seq + 1` computed by the UPDATE of the channel row,
 *   which PostgreSQL re-evaluates on the newest version after waiting for a concurrent send.
 */
const WRITE_SQL = {
  /**
   * POST /entries: the write scope; the linked members ($7, in link order) locked in id order, which
   * are not live members of the account, and which are at the plan's note cap (plan from the
   * account, caps $9–$11: free, pro, pro_plus; live notes counted on entry_members_member); then,
   * when none is, the note, its links (position = place in the list) and `entry.created`. The
   * verdict columns say why nothing was written: no scope (500), link positions not live (400), at
   * the cap (403).
   */
  createEntry: `with ${writeScope()},
  linked as (select id, deleted_at from members where user_id = $1::uuid and id = any($7::uuid[]) order by id for share),
  plan as (select coalesce((select plan from accounts where id = $1::uuid), 'free') as plan),
  room as (
    update member_note_counts c set live = c.live from plan p
    where c.member_id in (select id from linked where deleted_at is null)
      and c.live < case p.plan when 'pro' then $10::int when 'pro_plus' then $11::int else $9::int end
    returning c.member_id),
  verdict as (
    select exists (select 1 from scope) as scoped,
      array(select l.n::int from unnest($7::uuid[]) with ordinality l(id, n)
            where not exists (select 1 from linked k where k.id = l.id and k.deleted_at is null) order by l.n) as unlinkable,
      array(select l.n::int from unnest($7::uuid[]) with ordinality l(id, n)
            where exists (select 1 from linked k where k.id = l.id and k.deleted_at is null)
              and not exists (select 1 from room r where r.member_id = l.id)
            order by l.n) as capped,
      p.plan
    from plan p),
  entry as (
    insert into entries (id, user_id, side_system_id, sub_system_id, title, content, member_id, member_ids, created_at, updated_at, deleted_at)
    select $2::uuid, $1::uuid, s.side_system_id, s.sub_system_id, $3::text, $4::text, $5::uuid, $6::jsonb, $8::bigint, $8::bigint, null
    from scope s, verdict v where cardinality(v.unlinkable) = 0 and cardinality(v.capped) = 0
    returning id),
  links as (
    insert into entry_members (entry_id, member_id, user_id, position)
    select e.id, l.id, $1::uuid, l.n - 1 from entry e, unnest($7::uuid[]) with ordinality l(id, n)),
  ${eventRow('entry.created', 'entries', '$8', '$12', "jsonb_build_object('id', e.id)", 'entry e')},
  ${appendEvent('event')}
  select v.scoped, v.unlinkable, v.capped, v.plan, (select count(*) from entry)::int as created, ${NOTIFY} as notified
  from verdict v`,

  /**
   * POST /front/members: the member ($2) must be the account's, not in the trash (400), not
   * archived (400); createdBy ($3), when given, the account's and not in the trash (400); a member
   * fronting already is a no-op (204, nothing written, no event); then the session at the next
   * position in the write scope, and `front.changed` with the front after it.
   */
  startFronting: `with ${frontLock(1)}, target as (select archived_at, deleted_at from members where id = $2::uuid and user_id = $1::uuid),
  creator as (select 1 from members where id = $3::uuid and user_id = $1::uuid and deleted_at is null),
  fronting as (select 1 from front_sessions where user_id = $1::uuid and member_id = $2::uuid and ended_at is null and deleted_at is null),
  ${writeScope(` and ${AFTER_FRONT_LOCK}`)},
  verdict as (
    select case
      when not exists (select 1 from target where deleted_at is null) then 'not_member'
      when exists (select 1 from target where archived_at is not null) then 'archived'
      when $3::uuid is not null and not exists (select 1 from creator) then 'creator'
      when exists (select 1 from fronting) then 'fronting'
      when not exists (select 1 from scope) then 'no_scope'
      else 'ok' end as outcome),
  started as (
    insert into front_sessions (id, user_id, member_id, side_system_id, sub_system_id, started_at, ended_at, note, created_by,
      position, created_at, updated_at, deleted_at)
    select $4::uuid, $1::uuid, $2::uuid, s.side_system_id, s.sub_system_id, $6::bigint, null, $5::text, $3::uuid,
      (select position from front_locked),
      $6::bigint, $6::bigint, null
    from scope s, verdict v where v.outcome = 'ok' and ${AFTER_FRONT_LOCK}
    on conflict (user_id, member_id) where ended_at is null and deleted_at is null do nothing
    returning id, member_id, started_at, note, position),
  open_now as (${OPEN_SESSIONS} union all select id, member_id, started_at, note, position from started),
  ${FRONT_STATE},
  ${eventRow('front.changed', 'front', '$6', '$7', "jsonb_build_object('front', f.state)", 'front_state f where exists (select 1 from started)')},
  ${appendEvent('event')}
  select v.outcome, (select count(*) from started)::int as started, ${NOTIFY} as notified from verdict v`,

  /**
   * DELETE /front/members/{memberId}: the member must be the account's (in the trash or not; 400
   * otherwise); its open session, if any, ends and leaves the order; `front.changed` with the front
   * after it, as the server appends it whether a session ended or not.
   */
  stopFronting: `with ${frontLock(0)}, target as (select 1 from members where id = $2::uuid and user_id = $1::uuid),
  ended as (
    update front_sessions set ended_at = $3::bigint, position = null, updated_at = $3::bigint
    where user_id = $1::uuid and member_id = $2::uuid and ended_at is null and deleted_at is null and exists (select 1 from target)
      and ${AFTER_FRONT_LOCK}
    returning id),
  open_now as (${OPEN_SESSIONS} and s.id not in (select id from ended)),
  ${FRONT_STATE},
  ${eventRow('front.changed', 'front', '$3', '$4', "jsonb_build_object('front', f.state)", 'front_state f where exists (select 1 from target)')},
  ${appendEvent('event')}
  select exists (select 1 from target) as found, ${NOTIFY} as notified`,

  /**
   * POST /messaging/channels/{channelId}/messages: the channel ($2) live in a live space of the
   * account (404), the author ($3) a live, non-archived member (400); the mentions ($7, in text
   * order) kept that are live, non-archived members of the account (of the space's side system, if
   * it has one); the channel's sequence and unread count moved on; the message (sealed in JS with
   * the key $5 under its id); `message.created`. Answers the message's columns and its mentions.
   */
  sendMessage: `with ch as (
    select c.id, s.side_system_id from messaging_channels c join messaging_spaces s on s.id = c.space_id
    where c.id = $2::uuid and c.user_id = $1::uuid and c.archived_at is null and s.archived_at is null),
  author as (
    select m.id, ${mediaVersion('m.avatar')} as avatar_v from members m
    where m.id = $3::uuid and m.user_id = $1::uuid and m.deleted_at is null and m.archived_at is null),
  mentioned as (
    select x.n, mb.id, mb.name, mb.display_name
    from ch, unnest($7::uuid[]) with ordinality x(id, n)
      join members mb on mb.id = x.id and mb.user_id = $1::uuid and mb.deleted_at is null and mb.archived_at is null
    where ch.side_system_id is null or mb.side_system_id = ch.side_system_id),
  sent as (
    update messaging_channels c set last_seq = c.last_seq + 1, unread_count = c.unread_count + 1
    from ch, author where c.id = ch.id and c.archived_at is null
    returning c.id, c.last_seq),
  message as (
    insert into messaging_messages (id, user_id, channel_id, seq, author_member_id, key_id, content_enc, mention_member_ids, created_at)
    select $4::uuid, $1::uuid, s.id, s.last_seq, a.id, $5::text, $6::bytea, array(select id from mentioned order by n), $8::bigint
    from sent s, author a
    returning id, channel_id, author_member_id),
  ${eventRow('message.created', 'messaging', '$8', '$9', "jsonb_build_object('id', m.id, 'channelId', m.channel_id)", 'message m')},
  ${appendEvent('event')}
  select exists (select 1 from ch) as channel_found, exists (select 1 from author) as author_live, m.id, m.channel_id,
    m.author_member_id, (select avatar_v from author),
    (select coalesce(json_agg(json_build_object('memberId', id, 'name', name, 'displayName', coalesce(display_name, '')) order by n), '[]'::json)
     from mentioned) as mentions,
    ${NOTIFY} as notified
  from (select 1) one left join message m on true`,
};

const SQL = {
  key: 'select id, user_id, scopes, revoked_at, expires_at from api_keys where key_hash = $1',
  touchKeys: 'update api_keys set last_used_at = $2 where id = any($1::uuid[])',
  rateLimit: `insert into rate_limit_windows as w (key_id, window_start, count) values ($1, $2, $3)
    on conflict (key_id) do update set
      count = case when w.window_start + ${WINDOW_MS} <= excluded.window_start then excluded.count else w.count + excluded.count end,
      window_start = case when w.window_start + ${WINDOW_MS} <= excluded.window_start then excluded.window_start else w.window_start end
    returning count, window_start`,
  /**
   * The open sessions of live members in front order (kind 0, with the member), then the tier
   * presence of live members (kind 1): a union sorted as one.
   */
  front: `select 0 as kind, s.id, s.member_id, s.started_at, s.note, s.position, ${MEMBER_COLUMNS}, null::text as tier_key, null::text as tier_name
    from front_sessions s join members m on m.id = s.member_id and m.user_id = $1 and m.deleted_at is null
    where s.user_id = $1 and s.ended_at is null and s.deleted_at is null
    union all
    select 1, p.member_id, p.member_id, p.created_at, p.note, null, ${Array(16).fill('null').join(', ')}, p.tier_key, t.display_name
    from front_tier_presence p join members m on m.id = p.member_id and m.user_id = $1 and m.deleted_at is null
      left join front_custom_tiers t on t.user_id = p.user_id and t.id::text = p.tier_key
    where p.user_id = $1
    order by 1, 6 asc nulls last, 4, 2`,
  /**
   * The newest notes of the scope, one row per linked member (in link order), or one with no
   * member. The links are a lateral subquery with its own ORDER BY, which PostgreSQL never merges
   * into the outer join: each note's links are two primary-key probes, whatever plan is cached
   * (merged, a generic plan may hash every link and member of the account).
   */
  entries: `select e.id, e.title, e.content, e.created_at, e.updated_at, l.summary_id, l.name, l.display_name, l.archived_at, l.avatar_v
    from active_system_context c
      cross join lateral (${scoped('entries', 'x.id, x.title, x.content, x.created_at, x.updated_at', '', 'x.updated_at desc, x.id', '$2')}) e
      left join lateral (
        select em.position, ${SUMMARY_COLUMNS}
        from entry_members em join members m on m.id = em.member_id and m.user_id = c.user_id
        where em.entry_id = e.id and em.user_id = c.user_id
        order by em.position) l on true
    where c.user_id = $1
    order by e.updated_at desc, e.id, l.position`,
  membersFirst: membersPage(''),
  membersAfter: membersPage(' and (x.created_at, x.id) > ($3::bigint, $4::uuid)'),
  historyFirst: historyPage(''),
  historyAfter: historyPage(' and (s.started_at, s.id) < ($3::bigint, $4::uuid)'),
  ...WRITE_SQL,
};

if (process.argv.includes('--print-sql')) {
  process.stdout.write(JSON.stringify(SQL, null, 2) + '\n');
  process.exit(0);
}

function membersPage(after: string): string {
  const columns = MEMBER_COLUMNS.replace(/\bm\./g, 'x.');
  return `select m.* from active_system_context c cross join lateral (${scoped('members', columns, after, 'x.created_at, x.id', '$2')}) m
    where c.user_id = $1 order by 14, 1`;
}

/**
 * `size` + 1 sessions on the history index (not trashed, member not trashed: the same anti-join
 * as the server), each with its member's summary columns, and the history count in every row; a
 * page past the end is one row holding only the count. The member is a lateral subquery behind
 * OFFSET 0 (an optimisation fence): one primary-key probe per session, whatever plan is cached
 * (as a plain join, a generic plan may hash every member of the account for each page).
 */
function historyPage(after: string): string {
  return `select c.live, p.* from (select coalesce((select live from front_session_counts where user_id = $1), 0) as live) c
    left join lateral (
      select s.id, s.member_id, s.started_at, s.ended_at, s.note, m.*
      from (select s.id, s.member_id, s.started_at, s.ended_at, s.note from front_sessions s
            where s.user_id = $1 and s.deleted_at is null
              and not exists (select 1 from members t where t.id = s.member_id and t.deleted_at is not null)${after}
            order by s.started_at desc, s.id desc limit $2) s
        left join lateral (select ${SUMMARY_COLUMNS} from members m where m.id = s.member_id and m.user_id = $1 offset 0) m on true
    ) p on true
    order by p.started_at desc, p.id desc`;
}

// ---------------------------------------------------------------- JSON shapes

const mediaUrl = (memberId: string, kind: 'avatar' | 'banner', version: string | null) =>
  version === null ? null : `/api/v1/members/${memberId}/media?kind=${kind}&v=${version}`;

/** Columns from `offset` on, in MEMBER_COLUMNS order. */
function member(r: Row, offset: number, userId: string): Member {
  const id = r[offset] as string;
  return {
    _id: id,
    userId,
    sideSystemId: r[offset + 1] as string,
    subSystemId: r[offset + 2] as string | null,
    directoryId: r[offset + 3] as string | null,
    name: r[offset + 4] as string,
    displayName: (r[offset + 5] as string | null) ?? '',
    pronouns: (r[offset + 6] as string | null) ?? '',
    description: (r[offset + 7] as string | null) ?? '',
    avatarUrl: mediaUrl(id, 'avatar', r[offset + 8] as string | null),
    backgroundUrl: mediaUrl(id, 'banner', r[offset + 9] as string | null),
    aboutTags: r[offset + 10] as string[],
    profileStyle: r[offset + 11] as Member['profileStyle'],
    archivedAt: r[offset + 12] as number | null,
    createdAt: r[offset + 13] as number,
    updatedAt: r[offset + 14] as number,
    version: r[offset + 15] as number,
  };
}

/** Columns from `offset` on, in SUMMARY_COLUMNS order; null when the member was not found. */
function summary(r: Row, offset: number): Summary | null {
  const id = r[offset] as string | null;
  if (id === null) return null;
  return {
    id,
    name: r[offset + 1] as string,
    displayName: (r[offset + 2] as string | null) ?? '',
    archived: r[offset + 3] !== null,
    avatarUrl: mediaUrl(id, 'avatar', r[offset + 4] as string | null),
  };
}

const PRESET_NAMES = new Map([
  ['coFront', 'Co-front'],
  ['coConscious', 'Co-conscious'],
]);

async function getFront(userId: string): Promise<Schemas['FrontState']> {
  const rows = await run('ind_front', SQL.front, [userId]);
  const state: Schemas['FrontState'] = {
    memberIds: [],
    members: [],
    activeSessions: [],
    primaryMemberId: null,
    primaryNote: null,
    tieredPresence: [],
  };
  for (const r of rows) {
    const memberId = r[2] as string;
    const note = r[4] as string | null;
    if (r[0] === 0) {
      state.memberIds.push(memberId);
      state.members.push(member(r, 6, userId));
      const session: Schemas['FrontActiveSession'] = {
        _id: r[1] as string,
        userId,
        memberId,
        startedAt: r[3] as number,
      };
      if (note !== null) session.note = note;
      state.activeSessions.push(session);
    } else {
      const tierKey = r[22] as string;
      state.tieredPresence.push({
        memberId,
        tierKey,
        tierDisplayName: PRESET_NAMES.get(tierKey) ?? (r[23] as string | null) ?? tierKey,
        note,
      });
    }
  }
  if (state.memberIds.length > 0) {
    state.primaryMemberId = state.memberIds[0]!;
    state.primaryNote = state.activeSessions[0]!.note ?? null;
  }
  return state;
}

async function listEntries(userId: string, limit: number): Promise<Schemas['EntryListRow'][]> {
  const rows = await run('ind_entries', SQL.entries, [userId, limit]);
  const out: Schemas['EntryListRow'][] = [];
  let last: Schemas['EntryListRow'] | undefined;
  for (const r of rows) {
    if (last === undefined || last._id !== r[0]) {
      last = {
        _id: r[0] as string,
        title: r[1] as string | null,
        content: r[2] as string,
        createdAt: r[3] as number,
        updatedAt: r[4] as number,
        member: null,
        members: [],
      };
      out.push(last);
    }
    const linked = summary(r, 5);
    if (linked) {
      last.members.push(linked);
      last.member ??= linked;
    }
  }
  return out;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function decodeMembersCursor(cursor: string): [number, string] {
  let values: unknown;
  try {
    values = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    values = undefined;
  }
  if (
    Array.isArray(values) &&
    values.length === 2 &&
    Number.isSafeInteger(values[0]) &&
    typeof values[1] === 'string' &&
    UUID.test(values[1])
  ) {
    return values as [number, string];
  }
  throw new HttpError(400, 'BAD_REQUEST', 'cursor is invalid; pass the nextCursor of the previous page');
}

async function listMembersPage(
  userId: string,
  limit: number,
  cursor: string | undefined,
): Promise<{ items: Member[]; nextCursor: string | null }> {
  const after = cursor === undefined ? undefined : decodeMembersCursor(cursor);
  const rows = after
    ? await run('ind_members_after', SQL.membersAfter, [userId, limit + 1, after[0], after[1]])
    : await run('ind_members_first', SQL.membersFirst, [userId, limit + 1]);
  const items = rows.slice(0, limit).map((r) => member(r, 0, userId));
  const last = rows.length > limit ? items[items.length - 1]! : undefined;
  return {
    items,
    nextCursor: last ? Buffer.from(JSON.stringify([last.createdAt, last._id]), 'utf8').toString('base64url') : null,
  };
}

async function getHistory(
  userId: string,
  limit: number,
  after: { startedAt: number; id: string } | undefined,
): Promise<Schemas['FrontHistoryPage']> {
  const rows = after
    ? await run('ind_history_after', SQL.historyAfter, [userId, limit + 1, after.startedAt, after.id])
    : await run('ind_history_first', SQL.historyFirst, [userId, limit + 1]);
  const count = rows[0]![0] as number;
  const sessions = rows[0]![1] === null ? [] : rows;
  const page = sessions.slice(0, limit);
  const items: Schemas['FrontHistoryPage']['items'] = [];
  for (const r of page) {
    const linked = summary(r, 6);
    if (!linked) continue; // the member is gone: the server drops the item too, the cursor stays
    const startedAt = r[3] as number;
    const endedAt = r[4] as number | null;
    const session: Schemas['FrontHistorySession'] = {
      _id: r[1] as string,
      userId,
      memberId: r[2] as string,
      startedAt,
      endedAt,
    };
    if (r[5] !== null) session.note = r[5] as string;
    items.push({ session, member: linked, durationMs: endedAt === null ? null : endedAt - startedAt });
  }
  const last = sessions.length > limit ? page[page.length - 1]! : undefined;
  return { items, count, nextCursor: last ? { startedAt: last[3] as number, id: last[1] as string } : null };
}

// ---------------------------------------------------------------- writes

/** The plans' note caps per member (the server's NOTE_CAP_* settings and their defaults). */
const NOTE_CAPS = {
  free: Number(env.NOTE_CAP_FREE ?? 100),
  pro: Number(env.NOTE_CAP_PRO ?? 1000),
  pro_plus: Number(env.NOTE_CAP_PRO_PLUS ?? 10_000),
};
const PLAN_NAMES: Record<string, string> = { free: 'Free', pro: 'Pro', pro_plus: 'Pro+' };

/** One problem with a request's input, as the server's 400 lists it in `details`. */
interface Problem {
  in: 'body' | 'path' | 'query';
  pointer: string;
  rule: string;
  message: string;
}

/** A 400 for invalid input: `message` names the first problem of the path and the first of the body. */
function invalid(problems: Problem[]): HttpError {
  const firsts = [problems.find((p) => p.in === 'path'), problems.find((p) => p.in === 'body')];
  const message = [...new Set(firsts.filter((p) => p !== undefined).map((p) => p.message))].join('; ');
  return new HttpError(400, 'BAD_REQUEST', message, {}, problems);
}

const notImplemented = (what: string) =>
  new HttpError(501, 'NOT_IMPLEMENTED', `${what} is not implemented by the independent baseline`);

/** The rules of the request bodies the baseline takes, as the contract states them. */
type Rule =
  | { type: 'string'; nullable?: boolean; minLength?: number; maxLength?: number; uuid?: boolean }
  | { type: 'array'; minItems?: number; maxItems?: number; uniqueItems?: boolean; items: Rule }
  /** A field the contract has and the baseline refuses with 501 when it is sent (not checked further). */
  | { type: 'unsupported' };
interface BodyRule {
  required: string[];
  properties: Record<string, Rule>;
}

const UUID_RULE: Rule = { type: 'string', uuid: true };
const BODIES = {
  createEntry: {
    required: ['content'],
    properties: {
      content: { type: 'string', minLength: 1, maxLength: 100_000 },
      title: { type: 'string', nullable: true, maxLength: 200 },
      memberId: UUID_RULE,
      memberIds: { type: 'array', maxItems: 50, uniqueItems: true, items: UUID_RULE },
    },
  },
  startFronting: {
    required: ['memberId'],
    properties: { memberId: UUID_RULE, note: { type: 'string', maxLength: 1000 }, createdBy: UUID_RULE },
  },
  sendMessage: {
    required: ['memberId'],
    properties: {
      memberId: UUID_RULE,
      content: { type: 'string', nullable: true, minLength: 1, maxLength: 4000 },
      gifMetadata: { type: 'unsupported' },
      stagedAttachmentIds: { type: 'unsupported' },
      replyToMessageId: { type: 'unsupported' },
      clientMutationId: { type: 'unsupported' },
    },
  },
} satisfies Record<string, BodyRule>;

const escapeToken = (key: string) => key.replace(/~/g, '~0').replace(/\//g, '~1');

/**
 * The problems the server's contract validation (ajv, every error) finds in a body, in its order:
 * required fields, unknown fields (in the body's order), then each field in the contract's order;
 * within a field its length or size, uniqueness, then its items.
 */
function bodyProblems(body: unknown, rule: BodyRule): Problem[] {
  const problems: Problem[] = [];
  const add = (pointer: string, rule: string, message: string) => problems.push({ in: 'body', pointer, rule, message });
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    add('', 'type', 'Request body must be object');
    return problems;
  }
  const fields = body as Record<string, unknown>;
  for (const name of rule.required)
    if (!Object.hasOwn(fields, name)) add(`/${name}`, 'required', `${name} is required`);
  for (const name of Object.keys(fields))
    if (!Object.hasOwn(rule.properties, name))
      add(`/${escapeToken(name)}`, 'additionalProperties', `Unknown field '${name}'`);
  const check = (value: unknown, r: Rule, field: string, pointer: string): void => {
    if (r.type === 'unsupported') return;
    if (r.type === 'string') {
      if (value === null && r.nullable) return;
      if (typeof value !== 'string')
        return void add(pointer, 'type', `${field} must be ${r.nullable ? 'string,null' : 'string'}`);
      const length = [...value].length;
      if (r.maxLength !== undefined && length > r.maxLength)
        add(pointer, 'maxLength', `${field} must NOT have more than ${r.maxLength} characters`);
      if (r.minLength !== undefined && length < r.minLength)
        add(pointer, 'minLength', `${field} must NOT have fewer than ${r.minLength} characters`);
      if (r.uuid && !UUID.test(value)) add(pointer, 'pattern', `${field} must be a valid UUID`);
      return;
    }
    if (!Array.isArray(value)) return void add(pointer, 'type', `${field} must be array`);
    if (r.maxItems !== undefined && value.length > r.maxItems)
      add(pointer, 'maxItems', `${field} must NOT have more than ${r.maxItems} items`);
    if (r.minItems !== undefined && value.length < r.minItems)
      add(pointer, 'minItems', `${field} must NOT have fewer than ${r.minItems} items`);
    if (r.uniqueItems) {
      // ajv's loop: from the last item down, each against the items before it.
      duplicate: for (let i = value.length - 1; i > 0; i--)
        for (let j = i - 1; j >= 0; j--)
          if (JSON.stringify(value[i]) === JSON.stringify(value[j])) {
            add(
              pointer,
              'uniqueItems',
              `${field} must NOT have duplicate items (items ## ${j} and ${i} are identical)`,
            );
            break duplicate;
          }
    }
    for (const [i, item] of value.entries()) check(item, r.items, `${field}[${i}]`, `${pointer}/${i}`);
  };
  for (const [name, r] of Object.entries(rule.properties))
    if (Object.hasOwn(fields, name)) check(fields[name], r, name, `/${name}`);
  return problems;
}

/** The server's input hygiene: no string of the body (keys included) holds U+0000 or a lone surrogate. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
function hygieneProblems(value: unknown, path = '', pointer = '', out: Problem[] = []): Problem[] {
  const text = (s: string) =>
    s.includes('\u0000')
      ? { rule: 'nulCharacter', text: 'must not contain the NUL character (U+0000)' }
      : LONE_SURROGATE.test(s)
        ? { rule: 'unpairedSurrogate', text: 'must not contain an unpaired UTF-16 surrogate (invalid Unicode)' }
        : undefined;
  if (typeof value === 'string') {
    const p = text(value);
    if (p) out.push({ in: 'body', pointer, rule: p.rule, message: `${path || 'Request body'} ${p.text}` });
  } else if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) hygieneProblems(item, `${path}[${i}]`, `${pointer}/${i}`, out);
  } else if (typeof value === 'object' && value !== null) {
    for (const [key, item] of Object.entries(value)) {
      const p = text(key);
      if (p)
        out.push({
          in: 'body',
          pointer: `${pointer}/${escapeToken(key)}`,
          rule: p.rule,
          message: `A field name in ${path || 'the request body'} ${p.text}`,
        });
      hygieneProblems(item, path ? `${path}.${key}` : key, `${pointer}/${escapeToken(key)}`, out);
    }
  }
  return out;
}

const BODY_LIMIT = 1024 * 1024;

/** The JSON body as the server's body parsing takes it: undefined when none was sent. */
async function readJson(req: IncomingMessage): Promise<unknown> {
  const length = req.headers['content-length'];
  if (req.headers['transfer-encoding'] === undefined && (length === undefined || length === '0')) return undefined;
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/json' && !/^application\/[^/]*\+json$/.test(type))
    throw new HttpError(415, 'UNSUPPORTED_MEDIA_TYPE', 'Content-Type must be application/json');
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > BODY_LIMIT) throw new HttpError(413, 'PAYLOAD_TOO_LARGE', `Request body exceeds ${BODY_LIMIT} bytes`);
      chunks.push(chunk);
    }
  } catch (err) {
    if (err instanceof HttpError) throw err;
    throw new HttpError(400, 'BAD_REQUEST', 'Request body could not be read'); // the client went away
  }
  let body: unknown;
  try {
    body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    body = undefined;
  }
  // body-parser's strict mode: an object or an array, nothing else.
  if (typeof body !== 'object' || body === null) {
    const message = 'Request body is not valid JSON';
    throw new HttpError(400, 'BAD_REQUEST', message, {}, [{ in: 'body', pointer: '', rule: 'json', message }]);
  }
  return body;
}

/** The body checked as the server checks it before its handler runs: present, clean, valid. */
function validBody<T>(body: unknown, rule: BodyRule, pathProblems: Problem[] = []): T {
  if (body === undefined) {
    const message = 'Request body is required (application/json)';
    throw new HttpError(400, 'BAD_REQUEST', message, {}, [{ in: 'body', pointer: '', rule: 'required', message }]);
  }
  const dirty = hygieneProblems(body);
  if (dirty.length > 0) throw new HttpError(400, 'BAD_REQUEST', dirty[0]!.message, {}, dirty);
  const problems = [...pathProblems, ...bodyProblems(body, rule)];
  if (problems.length > 0) throw invalid(problems);
  return body as T;
}

function uuidParam(name: string, value: string): Problem[] {
  return UUID.test(value)
    ? []
    : [{ in: 'path', pointer: name, rule: 'pattern', message: `${name} must be a valid UUID` }];
}

const actorOf = (auth: Auth) => JSON.stringify({ kind: 'key', id: auth.keyId });

/** The server's message cipher, written out: AES-256-GCM, random IV, account and message ids as associated data. */
const MESSAGE_KEYS = (env.MESSAGE_ENCRYPTION_KEYS ?? '')
  .split(',')
  .map((part) => part.trim())
  .filter(Boolean)
  .map((part) => {
    const colon = part.indexOf(':');
    return {
      id: part.slice(0, colon),
      key: Buffer.from(
        part
          .slice(colon + 1)
          .replace(/-/g, '+')
          .replace(/_/g, '/'),
        'base64',
      ),
    };
  });

function seal(accountId: string, messageId: string, text: string): { keyId: string; data: Buffer } {
  const primary = MESSAGE_KEYS[0];
  if (!primary) throw new Error('MESSAGE_ENCRYPTION_KEYS is not set');
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', primary.key, iv, { authTagLength: 16 });
  cipher.setAAD(Buffer.from(`ada-message-v1\0${accountId.toLowerCase()}\0${messageId.toLowerCase()}`, 'utf8'));
  const body = Buffer.concat([cipher.update(text, 'utf8'), cipher.final()]);
  return { keyId: primary.id, data: Buffer.concat([iv, body, cipher.getAuthTag()]) };
}

/** What a write answers: a status, and a JSON body or none. */
interface Written {
  status: number;
  body?: unknown;
}

/** A scope failure of the write statements: the server throws there (its 500). */
const noScope = () => new Error('the account has no live active side/sub system');

async function createEntry(auth: Auth, input: Schemas['CreateEntryRequest'], now: number): Promise<Written> {
  const images = /!\[[^\]\n]*\]\(\s*<?https?:\/\//.test(input.content);
  if (images) throw notImplemented('A note with external images (the server re-hosts them)');
  // The link set: the single link first, then the list, without repeats.
  const links = [...new Set([...(input.memberId ? [input.memberId] : []), ...(input.memberIds ?? [])])];
  const id = randomUUID();
  const [row] = await run('ind_create_entry', SQL.createEntry, [
    auth.accountId,
    id,
    input.title ?? null,
    input.content,
    input.memberId ?? null,
    input.memberIds ? JSON.stringify(input.memberIds) : null,
    links,
    now,
    NOTE_CAPS.free,
    NOTE_CAPS.pro,
    NOTE_CAPS.pro_plus,
    actorOf(auth),
  ]);
  const [scoped, unlinkable, capped, plan] = row as [boolean, number[], number[], string];
  if (!scoped) throw noScope();
  const named = (positions: number[]) => positions.map((n) => links[n - 1]!).join(', ');
  if (unlinkable.length > 0)
    throw new HttpError(400, 'BAD_REQUEST', `Linked members must be your live members; not: ${named(unlinkable)}`);
  if (capped.length > 0) {
    const cap = NOTE_CAPS[plan as keyof typeof NOTE_CAPS] ?? NOTE_CAPS.free;
    throw new HttpError(
      403,
      'NOTE_LIMIT_REACHED',
      `Note limit of ${cap} per member on the ${PLAN_NAMES[plan] ?? 'Free'} plan reached for member ${named(capped)}`,
    );
  }
  return { status: 201, body: { id } };
}

/** Whitespace-only notes are no note. */
const noteOrNull = (note: string | undefined) => (note === undefined || note.trim() === '' ? null : note);

async function startFronting(auth: Auth, input: Schemas['StartFrontingRequest'], now: number): Promise<Written> {
  const [row] = await run('ind_start_fronting', SQL.startFronting, [
    auth.accountId,
    input.memberId,
    input.createdBy ?? null,
    randomUUID(),
    noteOrNull(input.note),
    now,
    actorOf(auth),
  ]);
  switch (row![0] as string) {
    case 'not_member':
      throw new HttpError(400, 'BAD_REQUEST', 'memberId is not one of your members');
    case 'archived':
      throw new HttpError(400, 'BAD_REQUEST', 'memberId is an archived member; unarchive it first');
    case 'creator':
      throw new HttpError(400, 'BAD_REQUEST', 'createdBy is not one of your members');
    case 'no_scope':
      throw noScope();
    default:
      return { status: 204 }; // started, or fronting already (nothing changes)
  }
}

async function stopFronting(auth: Auth, memberId: string, now: number): Promise<Written> {
  const [row] = await run('ind_stop_fronting', SQL.stopFronting, [auth.accountId, memberId, now, actorOf(auth)]);
  if (row![0] !== true) throw new HttpError(400, 'BAD_REQUEST', 'memberId is not one of your members');
  return { status: 204 };
}

const MENTION = /<@([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})>/g;

async function sendMessage(
  auth: Auth,
  channelId: string,
  input: Schemas['SendMessageRequest'],
  now: number,
): Promise<Written> {
  for (const field of ['gifMetadata', 'stagedAttachmentIds', 'replyToMessageId', 'clientMutationId'] as const)
    if (input[field] !== undefined) throw notImplemented(`A message with ${field}`);
  const content = input.content ?? '';
  if (content === '')
    throw new HttpError(400, 'BAD_REQUEST', 'content is required unless attachments or a GIF are sent');
  if (/https?:\/\/[^\s<>"]/i.test(content))
    throw notImplemented('A message with links (the server queues their previews)');
  const mentions = [...new Set([...content.matchAll(MENTION)].map((m) => m[1]!.toLowerCase()))].slice(0, 50);
  const id = randomUUID();
  const sealed = seal(auth.accountId, id, content);
  const [row] = await run('ind_send_message', SQL.sendMessage, [
    auth.accountId,
    channelId,
    input.memberId,
    id,
    sealed.keyId,
    sealed.data,
    mentions,
    now,
    actorOf(auth),
  ]);
  const r = row!;
  if (r[0] !== true) throw new HttpError(404, 'NOT_FOUND', 'Channel not found');
  if (r[1] !== true)
    throw new HttpError(400, 'BAD_REQUEST', 'memberId is not a live, non-archived member of this account');
  const author = r[4] as string;
  const message: Schemas['Message'] = {
    id: r[2] as string,
    channelId: r[3] as string,
    authorMemberId: author,
    authorMemberAvatarUrl: mediaUrl(author, 'avatar', r[5] as string | null),
    content,
    createdAt: now,
    editedAt: null,
    attachments: [],
    linkPreviews: [],
    gif: null,
    mentions: r[6] as Schemas['Message']['mentions'],
    replyTo: null,
  };
  return { status: 201, body: message };
}

// ---------------------------------------------------------------- per-request duties

type Scope = 'front' | 'entries' | 'members' | 'messaging';
interface Auth {
  accountId: string;
  keyId: string;
  scopes: Partial<Record<string, 'read' | 'read_write'>>;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
    /** On a 400 for invalid input, every problem found (the server's `details`). */
    readonly details?: Problem[],
  ) {
    super(message);
  }
}

const keyCache = new Map<string, { auth: Auth | null; expiresAt: number }>();
const usedKeys = new Set<string>();

async function authenticate(header: string | undefined, now: number): Promise<Auth | null> {
  const secret = header ? /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1] : undefined;
  if (!secret || !secret.startsWith('adk_') || secret.length !== 47 || !/^[A-Za-z0-9_-]+$/.test(secret.slice(4)))
    return null;
  const hash = createHash('sha256').update(secret).digest('hex');
  const cached = keyCache.get(hash);
  let auth: Auth | null;
  if (cached && cached.expiresAt > now) {
    auth = cached.auth;
  } else {
    const [row] = await run('ind_key', SQL.key, [hash]);
    const expiresAt = (row?.[4] ?? null) as number | null;
    const usable = row !== undefined && row[3] === null && (expiresAt === null || expiresAt > now);
    auth = usable ? { accountId: row[1] as string, keyId: row[0] as string, scopes: row[2] as Auth['scopes'] } : null;
    if (KEY_TTL_MS > 0) {
      if (keyCache.size >= 10_000) keyCache.clear();
      keyCache.set(hash, {
        auth,
        expiresAt: usable && expiresAt !== null ? Math.min(now + KEY_TTL_MS, expiresAt) : now + KEY_TTL_MS,
      });
    }
  }
  if (auth) usedKeys.add(auth.keyId);
  return auth;
}

async function flushKeyUse(): Promise<void> {
  if (usedKeys.size === 0) return;
  const ids = [...usedKeys];
  usedKeys.clear();
  await run('ind_touch_keys', SQL.touchKeys, [ids, Date.now()]).catch(() => undefined);
}
setInterval(() => void flushKeyUse(), 15_000).unref();

/** The server's PostgreSQL rate-limit store (server/http/rateLimit.ts), the same algorithm. */
const windows = new Map<string, { total: number; pending: number; resetAt: number }>();
const MARGIN = Math.max(50, Math.ceil(RATE_LIMIT / 10));

async function addCount(keyId: string, delta: number, now: number): Promise<{ count: number; resetAt: number }> {
  const [row] = await run('ind_rate_limit', SQL.rateLimit, [keyId, now, delta]);
  return { count: row![0] as number, resetAt: (row![1] as number) + WINDOW_MS };
}

function learn(keyId: string, state: { count: number; resetAt: number }): void {
  const current = windows.get(keyId);
  if (current && current.resetAt === state.resetAt) current.total = Math.max(current.total, state.count);
  else windows.set(keyId, { total: state.count, pending: 0, resetAt: state.resetAt });
}

async function hit(keyId: string, now: number): Promise<{ count: number; resetAt: number }> {
  const local = windows.get(keyId);
  if (local && local.resetAt > now) {
    const seen = local.total + local.pending;
    if (seen < RATE_LIMIT - MARGIN || seen >= RATE_LIMIT) {
      local.pending += 1;
      return { count: seen + 1, resetAt: local.resetAt };
    }
    const delta = local.pending + 1;
    local.pending = 0;
    try {
      const state = await addCount(keyId, delta, now);
      learn(keyId, state);
      return state;
    } catch (err) {
      local.pending += delta - 1;
      throw err;
    }
  }
  const state = await addCount(keyId, 1, now);
  learn(keyId, state);
  return state;
}

let syncing = false;
setInterval(() => {
  if (syncing) return;
  syncing = true;
  void (async () => {
    const now = Date.now();
    for (const [keyId, local] of windows) {
      if (local.resetAt <= now) {
        windows.delete(keyId);
        continue;
      }
      if (local.pending === 0) continue;
      const delta = local.pending;
      local.pending = 0;
      try {
        const state = await addCount(keyId, delta, now);
        if (state.resetAt === local.resetAt) local.total = Math.max(local.total, state.count);
        else Object.assign(local, { total: state.count, resetAt: state.resetAt });
      } catch {
        local.pending += delta;
      }
    }
  })().finally(() => (syncing = false));
}, 100).unref();

const LOG_BINDINGS = { pid: process.pid, hostname: hostname(), service: 'account-data-api' };

/** One line as the server's request log writes it (pino's layout and fields), synchronously to stdout. */
function logRequest(
  reqId: string,
  method: string,
  path: string,
  status: number,
  started: bigint,
  auth: Auth | undefined,
): void {
  if (!LOGGING) return;
  const line = {
    level: status >= 500 ? 50 : 30,
    time: Date.now(),
    ...LOG_BINDINGS,
    reqId,
    req: { method, path },
    res: { statusCode: status },
    responseTime: Number(process.hrtime.bigint() - started) / 1e6,
    ...(auth ? { userId: auth.accountId, keyId: auth.keyId } : {}),
    msg: status >= 500 ? 'request failed' : 'request completed',
  };
  writeSync(1, JSON.stringify(line) + '\n');
}

// ---------------------------------------------------------------- routing

function limitParam(q: URLSearchParams, name: string, min: number, max: number, fallback?: number): number {
  const raw = q.get(name);
  if (raw === null) {
    if (fallback === undefined) throw new HttpError(400, 'BAD_REQUEST', `query parameter '${name}' is required`);
    return fallback;
  }
  const n = Number(raw);
  if (!/^-?\d+$/.test(raw) || n < min || n > max)
    throw new HttpError(400, 'BAD_REQUEST', `query parameter '${name}' must be an integer from ${min} to ${max}`);
  return n;
}

function only(q: URLSearchParams, allowed: string[]): void {
  for (const name of q.keys()) {
    if (allowed.includes(name)) continue;
    const message = `Unknown query parameter '${name}'`;
    throw new HttpError(400, 'BAD_REQUEST', message, {}, [
      { in: 'query', pointer: name, rule: 'additionalProperties', message },
    ]);
  }
}

const ROUTES = new Map<string, { scope: Scope; handle: (userId: string, q: URLSearchParams) => Promise<unknown> }>([
  ['/api/v1/front', { scope: 'front', handle: (userId, q) => (only(q, []), getFront(userId)) }],
  [
    '/api/v1/entries',
    {
      scope: 'entries',
      handle: (userId, q) => {
        only(q, ['limit']);
        return listEntries(userId, limitParam(q, 'limit', 1, 100, 50));
      },
    },
  ],
  [
    '/api/v1/members/page',
    {
      scope: 'members',
      handle: (userId, q) => {
        only(q, ['limit', 'cursor']);
        return listMembersPage(userId, limitParam(q, 'limit', 1, 200), q.get('cursor') ?? undefined);
      },
    },
  ],
  [
    '/api/v1/front/history',
    {
      scope: 'front',
      handle: (userId, q) => {
        only(q, ['limit', 'cursorStartedAt', 'cursorId']);
        const limit = limitParam(q, 'limit', 1, 100, 20);
        const startedAt = q.get('cursorStartedAt');
        const id = q.get('cursorId');
        if ((startedAt === null) !== (id === null)) {
          throw new HttpError(
            400,
            'BAD_REQUEST',
            'cursorStartedAt and cursorId must be sent together (both from nextCursor) or not at all',
          );
        }
        if (startedAt === null || id === null) return getHistory(userId, limit, undefined);
        if (!/^\d+$/.test(startedAt) || !UUID.test(id))
          throw new HttpError(400, 'BAD_REQUEST', 'cursorStartedAt must be epoch ms and cursorId a UUID');
        return getHistory(userId, limit, { startedAt: Number(startedAt), id });
      },
    },
  ],
]);

interface WriteRoute {
  method: 'POST' | 'DELETE';
  /** The path, its parameters as capture groups. */
  pattern: RegExp;
  scope: Scope;
  handle: (auth: Auth, params: string[], req: IncomingMessage, now: number) => Promise<Written>;
}

const WRITES: WriteRoute[] = [
  {
    method: 'POST',
    pattern: /^\/api\/v1\/entries$/,
    scope: 'entries',
    handle: async (auth, _params, req, now) =>
      createEntry(auth, validBody(await readJson(req), BODIES.createEntry), now),
  },
  {
    method: 'POST',
    pattern: /^\/api\/v1\/front\/members$/,
    scope: 'front',
    handle: async (auth, _params, req, now) =>
      startFronting(auth, validBody(await readJson(req), BODIES.startFronting), now),
  },
  {
    method: 'DELETE',
    pattern: /^\/api\/v1\/front\/members\/([^/]+)$/,
    scope: 'front',
    handle: (auth, [memberId], _req, now) => {
      const problems = uuidParam('memberId', memberId!);
      if (problems.length > 0) throw invalid(problems);
      return stopFronting(auth, memberId!, now);
    },
  },
  {
    method: 'POST',
    pattern: /^\/api\/v1\/messaging\/channels\/([^/]+)\/messages$/,
    scope: 'messaging',
    handle: async (auth, [channelId], req, now) => {
      const body = validBody<Schemas['SendMessageRequest']>(
        await readJson(req),
        BODIES.sendMessage,
        uuidParam('channelId', channelId!),
      );
      return sendMessage(auth, channelId!, body, now);
    },
  },
];

/** The write route and its path parameters (decoded), if the request is one. */
function writeRoute(method: string, path: string): { route: WriteRoute; params: string[] } | undefined {
  for (const route of WRITES) {
    const m = route.method === method ? route.pattern.exec(path) : null;
    if (m) return { route, params: m.slice(1).map((p) => decodeURIComponent(p)) };
  }
  return undefined;
}

const SANE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

function sendJson(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(body),
  });
  res.end(body);
}

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const started = process.hrtime.bigint();
  const incoming = req.headers['x-request-id'];
  const reqId = typeof incoming === 'string' && SANE_REQUEST_ID.test(incoming) ? incoming : randomUUID();
  res.setHeader('X-Request-Id', reqId);
  const url = req.url ?? '/';
  const mark = url.indexOf('?');
  const path = mark < 0 ? url : url.slice(0, mark);
  const method = req.method ?? 'GET';
  let auth: Auth | undefined;
  try {
    if (path === '/healthz') return sendJson(res, 200, '{"status":"ok"}');
    const read = method === 'GET' ? ROUTES.get(path) : undefined;
    const write = read ? undefined : writeRoute(method, path);
    const route = read ?? write?.route;
    if (!route) throw new HttpError(404, 'NOT_FOUND', `No route for ${method} ${path}`);
    const now = Date.now();
    auth = (await authenticate(req.headers.authorization, now)) ?? undefined;
    if (!auth) {
      const presented = /^Bearer\s+\S+\s*$/i.test(req.headers.authorization ?? '');
      throw new HttpError(401, 'UNAUTHORIZED', 'Missing or invalid API key. Use Authorization: Bearer <token>.', {
        'WWW-Authenticate': `Bearer realm="api"${presented ? ', error="invalid_token"' : ''}`,
      });
    }
    const state = await hit(auth.keyId, now);
    const resetSeconds = Math.max(0, Math.ceil((state.resetAt - now) / 1000));
    res.setHeader('RateLimit-Limit', String(RATE_LIMIT));
    res.setHeader('RateLimit-Remaining', String(Math.max(0, RATE_LIMIT - state.count)));
    res.setHeader('RateLimit-Reset', String(resetSeconds));
    res.setHeader('RateLimit-Policy', `${RATE_LIMIT};w=${WINDOW_MS / 1000}`);
    if (state.count > RATE_LIMIT) {
      const retry = Math.max(1, resetSeconds);
      throw new HttpError(
        429,
        'RATE_LIMITED',
        `Rate limit of ${RATE_LIMIT} requests per minute exceeded; retry in ${retry} s`,
        { 'Retry-After': String(retry) },
      );
    }
    const granted = auth.scopes[route.scope];
    const query = new URLSearchParams(mark < 0 ? '' : url.slice(mark + 1));
    if (read) {
      if (granted !== 'read' && granted !== 'read_write')
        throw new HttpError(403, 'FORBIDDEN', `Missing API key scope: ${route.scope} requires read`);
      sendJson(res, 200, JSON.stringify(await read.handle(auth.accountId, query)));
    } else if (write) {
      if (granted !== 'read_write')
        throw new HttpError(403, 'FORBIDDEN', `Missing API key scope: ${route.scope} requires read_write`);
      if (req.headers['idempotency-key'] !== undefined) throw notImplemented('Idempotency-Key');
      only(query, []);
      const written = await write.route.handle(auth, write.params, req, now);
      if (written.body === undefined) {
        res.writeHead(written.status);
        res.end();
      } else sendJson(res, written.status, JSON.stringify(written.body));
    }
  } catch (err) {
    if (!(err instanceof HttpError)) process.stderr.write(`independent: ${(err as Error).stack ?? String(err)}\n`);
    const e = err instanceof HttpError ? err : new HttpError(500, 'INTERNAL', 'Internal server error');
    for (const [name, value] of Object.entries(e.headers)) res.setHeader(name, value);
    sendJson(res, e.status, JSON.stringify({ code: e.code, message: e.message, details: e.details }));
  }
  logRequest(reqId, method, path, res.statusCode, started, auth);
}

const server = createServer((req, res) => void handle(req, res));
server.keepAliveTimeout = 5_000;
server.listen(Number(env.PORT ?? 8081), env.HOST ?? '127.0.0.1', () =>
  process.stdout.write(`independent baseline listening on ${env.PORT}\n`),
);

process.on('SIGTERM', () => {
  server.close(
    () =>
      void flushKeyUse()
        .then(() => pool.end())
        .then(() => process.exit(0)),
  );
  server.closeAllConnections();
});
