/**
 * The bench's independent baseline: the owner reads of the bench answered by plain `node:http` +
 * `pg`, sharing no code with the server (no express, no knex, no services, no pino). Each read is
 * one named prepared statement selecting only the columns the answer needs (rows in array mode,
 * mapped in JS into exactly the server's JSON, key order included); `npm run bench` checks that the
 * two servers' bodies are equal before it measures them against each other.
 *
 * It does the per-request duties the server does (server/http/pipeline.ts and friends), written
 * out by hand: request id (echoed or generated) and the X-Request-Id header; bearer API key → the
 * key's account and scopes through an in-process cache (API_KEY_CACHE_TTL_MS, default 5 s; a miss
 * is one lookup by the key's SHA-256; key use recorded in one batched UPDATE every 15 s); the rate
 * limit counted in-process and synced to `rate_limit_windows` like the server's PostgreSQL store
 * (first request of a window at once, then one upsert per key every 100 ms; exact near the limit)
 * with the RateLimit-* headers; the scope check; the query parameters the bench sends, validated;
 * one JSON log line per request, formatted as the server's request log and written to stdout.
 * Not done: metrics (prom-client), CORS, contract validation of other parameters, writes.
 *
 * Routes: GET /api/v1/front, /api/v1/entries?limit, /api/v1/members/page?limit&cursor,
 * /api/v1/front/history?limit&cursorStartedAt&cursorId, and /healthz.
 *
 * Env: DATABASE_URL (its application_name is how the bench finds this server's backends), PORT,
 * HOST, DB_POOL_MAX (10), RATE_LIMIT_PER_MINUTE (1000), API_KEY_CACHE_TTL_MS (5000), LOG_LEVEL
 * (`silent` turns the log line off), SQL_CAPTURE_FILE (every statement appended as a JSON line,
 * as the server does, so the bench can count and EXPLAIN them).
 */
import { createHash, randomUUID } from 'node:crypto';
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
  if (CAPTURE) appendFileSync(CAPTURE, JSON.stringify({ sql: text, bindings: values }) + '\n');
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

// ---------------------------------------------------------------- per-request duties

type Scope = 'front' | 'entries' | 'members';
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
  for (const name of q.keys())
    if (!allowed.includes(name)) throw new HttpError(400, 'BAD_REQUEST', `Unknown query parameter '${name}'`);
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
    const route = ROUTES.get(path);
    if (!route || method !== 'GET') throw new HttpError(404, 'NOT_FOUND', `No route for ${method} ${path}`);
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
    if (granted !== 'read' && granted !== 'read_write')
      throw new HttpError(403, 'FORBIDDEN', `Missing API key scope: ${route.scope} requires read`);
    const body = await route.handle(auth.accountId, new URLSearchParams(mark < 0 ? '' : url.slice(mark + 1)));
    sendJson(res, 200, JSON.stringify(body));
  } catch (err) {
    if (!(err instanceof HttpError)) process.stderr.write(`independent: ${(err as Error).stack ?? String(err)}\n`);
    const e = err instanceof HttpError ? err : new HttpError(500, 'INTERNAL', 'Internal server error');
    for (const [name, value] of Object.entries(e.headers)) res.setHeader(name, value);
    sendJson(res, e.status, JSON.stringify({ code: e.code, message: e.message }));
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
