/**
 * The event log: `ctx.events.emit(ctx, entry)` (or `emitMany`, one statement for a bulk write's
 * events) appends to `events` in the transaction of the change it describes, so a rolled-back
 * write emits nothing and a committed one always does.
 *
 * Order: every append first takes one transaction-scoped advisory lock, held to commit, so appends
 * commit one after another in the order of their ids. A reader that has seen id n never later
 * finds a committed event below n, which is what lets a stream resume from one number without a
 * gap. The cost is that the tails of writing transactions (from their first event to their commit)
 * run one at a time.
 *
 * The append also sends `pg_notify('events', …)`, which PostgreSQL (and PGlite) delivers at commit
 * and never for a rolled-back transaction: the streams of every instance wake up then and read the
 * log (stream.ts).
 *
 * In the same statement each event is queued for the account's enabled webhooks that subscribe to
 * its type and may read its area (a `webhook_deliveries` row each, in event order), with one
 * `webhook_deliver` job per webhook (server/features/webhooks/): a committed event always has its
 * deliveries, a rolled-back one none.
 */
import type { components } from '../../generated/api.d.ts';
import {
  type EventEntry,
  type EventOptions,
  type EventSink,
  type KeyedStatement,
  type PendingEvent,
  requestTransactionOf,
  type ServiceContext,
} from '../core/context.ts';
import { type Sql, sql } from '../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../db/statements.ts';
import { exampleKeyed, storedUnderKey } from '../idempotency/inStatement.ts';
import { enqueueRows } from '../jobs/queue.ts';

type Schemas = components['schemas'];
export type Event = Schemas['Event'];

const AREA = 'events';
/** The channel of the commit-time notification. */
export const EVENTS_CHANNEL = 'events';
const TYPE = /^[a-z][a-z_]*(\.[a-z][a-z_]*)+$/;
/** The durable queue whose jobs send a webhook's pending deliveries: one job per webhook at a time, keyed `webhook:<id>`. */
export const WEBHOOK_QUEUE = 'webhook_deliver';
/** The notification's payload when the append queued webhook deliveries (the job queue then claims at once). */
export const WEBHOOKS_QUEUED = 'webhooks';

export type EventInsert = PendingEvent;

/**
 * The event log's lock (held to commit): appends take it, so ids commit in order. A statement that
 * also writes an idempotency key takes it before the key's row, as appendEvents' `keyed` does.
 */
export const EVENT_LOG_LOCK = sql`pg_advisory_xact_lock(hashtextextended('event log', 0))`;

/**
 * The append of `rows` (in the order given) under the log's lock, as the CTEs `locked`,
 * `appended`, `delivered` and `queued` of a `with`: the event log's statement below, the
 * statement that stores a keyed request's response with the events it held back
 * (server/idempotency/repo.ts), and the writes made in one statement (`when`: a condition of that
 * statement, false when the write was refused, which then appends nothing and takes no lock).
 */
export function appendEvents(rows: readonly EventInsert[], when?: Sql): Sql {
  const key = keyedRows.get(rows)?.take();
  // `appended` checks idempotency_held once per event row: without a row it would never run.
  if (key && rows.length === 0) throw new Error('a keyed write stores its answer with its events, and has none');
  // The answer of a keyed request is stored under its key when the write happened (`locked` has its row).
  return sql`locked as (select ${EVENT_LOG_LOCK}${when ? sql` where ${when}` : sql.empty}),${key ? storedUnderKey(key, sql`exists (select 1 from locked)`) : sql.empty}
    appended as (
      insert into events (account_id, type, area, occurred_at, actor, data, about_account_id)
      select r.account_id, r.type, r.area, r.occurred_at, r.actor, r.data, r.about_account_id
      -- A function scan yields the array's rows in order, and the identity follows the insert's order.
      from locked, jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
        as r (account_id uuid, type text, area text, occurred_at bigint, actor jsonb, data jsonb, about_account_id uuid)
      ${key ? sql`where idempotency_held((select count(*) from locked), (select count(*) from keyed))` : sql.empty}
      returning id, account_id, type, area, occurred_at
    ),
    delivered as (
      insert into webhook_deliveries (webhook_id, event_id, message_id, type, state, next_attempt_at, created_at)
      select w.id, e.id, e.id::text, e.type, 'pending', e.occurred_at, e.occurred_at
      from appended e
      join webhooks w on w.user_id = e.account_id and w.enabled and e.type = any(w.types) and e.area = any(w.areas)
      order by e.id, w.id
      returning webhook_id, next_attempt_at
    ),
    queued as (
      ${enqueueRows(WEBHOOK_QUEUE, sql`select jsonb_build_object('webhookId', webhook_id) as payload, 'webhook:' || webhook_id as key from delivered`, sql`(select min(next_attempt_at) from delivered)`)}
    )`;
}

/** The events of a keyed request (ServerContext.keyed), by the rows rows() built for it. */
const keyedRows = new WeakMap<readonly EventInsert[], KeyedStatement>();

/** After appendEvents' CTEs: the commit-time notification, as a select list (no row when nothing was appended). */
const notifyAppended = sql`pg_notify(${EVENTS_CHANNEL}::text, case when exists (select 1 from delivered) then ${WEBHOOKS_QUEUED}::text else '' end) as notified
    from (select 1 from appended limit 1) a`;

/** notifyAppended as one column of a statement's final select: `notified` (null when nothing was appended). */
export const notifiedColumn = sql`(select ${notifyAppended}) as notified`;

/** Example events of a keyed request, for the variant of a statement that stores its response (generated/sql/). */
export function keyedExample(rows: readonly EventInsert[]): EventInsert[] {
  const copy = [...rows];
  keyedRows.set(copy, exampleKeyed());
  return copy;
}

/** An event row for the statements' example variants (generated/sql/). */
export const EXAMPLE_EVENT: EventInsert = {
  account_id: EXAMPLE_UUID,
  type: 'a.b',
  area: 'members',
  occurred_at: 0,
  actor: {},
  data: {},
  about_account_id: null,
};

/** Appends events (in the order given) under the log's lock, and asks for the notification at commit. */
const append = statement<{ rows: EventInsert[] }, { notified: unknown }>({
  name: 'events_append',
  area: AREA,
  variants: { 'some events': { rows: [EXAMPLE_EVENT] } },
  build: ({ rows }) => sql`
    with ${appendEvents(rows)}
    select ${notifyAppended}`,
});

export interface EventRow {
  id: number;
  account_id: string;
  type: string;
  area: string;
  occurred_at: number;
  actor: Schemas['EventActor'];
  data: Record<string, unknown>;
}

/** The next events after `after`, oldest first: of some accounts (a stream catching up), or of all (the hub's live read). */
const listAfter = statement<{ accountIds: string[] | null; after: number; size: number }, EventRow>({
  name: 'events_after',
  area: AREA,
  variants: {
    'some accounts': { accountIds: [EXAMPLE_UUID], after: 0, size: 100 },
    'every account': { accountIds: null, after: 0, size: 100 },
  },
  build: ({ accountIds, after, size }) => sql`
    select id, account_id, type, area, occurred_at, actor, data from events
    where ${accountIds ? sql`account_id = any(${accountIds}::uuid[]) and ` : sql.empty}id > ${after}::bigint
    order by id limit ${size}`,
});

/** Which of these API keys are still valid (not revoked): the open streams' keys, checked once a second. */
const liveKeys = statement<{ ids: string[] }, { id: string }>({
  name: 'events_live_keys',
  area: AREA,
  variants: { one: { ids: [EXAMPLE_UUID] } },
  build: ({ ids }) => sql`select id from api_keys where id = any(${ids}::uuid[]) and revoked_at is null`,
});

/** The log's bounds: its newest id (0 when empty) and the highest id pruned. */
const bounds = statement<Record<string, never>, { newest: number | null; pruned: number }>({
  name: 'events_bounds',
  area: AREA,
  variants: { one: {} },
  build: () => sql`select (select max(id) from events) as newest, (select through from events_pruned) as pruned`,
});

/** Deletes events older than `before` (a batch at a time), moving the pruned mark past them. */
const prune = statement<{ before: number; size: number }, { n: number; marked: number }>({
  name: 'events_prune',
  area: AREA,
  variants: { one: { before: 0, size: 10_000 } },
  build: ({ before, size }) => sql`
    with gone as (
      delete from events where id in (select id from events where occurred_at < ${before}::bigint order by id limit ${size})
      returning id
    ),
    mark as (
      update events_pruned set through = greatest(through, (select coalesce(max(id), 0) from gone))
      returning 1
    )
    select (select count(*) from gone)::int as n, (select count(*) from mark) as marked`,
});

export const eventsRepo = {
  /** After `after`: of `accountIds`, or of every account when null. */
  after: (db: Parameters<typeof listAfter>[0], accountIds: string[] | null, after: number, size: number) =>
    listAfter(db, { accountIds, after, size }),
  liveKeys: async (db: Parameters<typeof liveKeys>[0], ids: string[]) =>
    new Set((await liveKeys(db, { ids })).map((r) => r.id)),
  bounds: async (db: Parameters<typeof bounds>[0]) => {
    const row = (await bounds(db, {}))[0];
    return { newest: row?.newest ?? 0, pruned: row?.pruned ?? 0 };
  },
  /** Deletes every event older than `before`, a batch at a time; how many went. */
  prune: async (db: Parameters<typeof prune>[0], before: number): Promise<number> => {
    let total = 0;
    for (;;) {
      const n = (await prune(db, { before, size: 10_000 }))[0]?.n ?? 0;
      total += n;
      if (n < 10_000) return total;
    }
  },
};

/** Who made the change, as the contract's EventActor says it (a key's id, never the key). */
function actorOf(ctx: ServiceContext): Schemas['EventActor'] {
  const { actor } = ctx;
  if (actor.kind === 'key')
    return actor.accountId === ctx.access.ownerId
      ? { kind: 'key', id: actor.keyId }
      : { kind: 'friend', id: actor.accountId };
  if (actor.kind === 'system') return { kind: 'system', id: actor.job };
  return { kind: 'operator', id: null };
}

export class DatabaseEventSink implements EventSink {
  emit(ctx: ServiceContext, entry: EventEntry & EventOptions): Promise<void> {
    return this.emitMany(ctx, [entry]);
  }

  async emitMany(ctx: ServiceContext, entries: Array<EventEntry & EventOptions>): Promise<void> {
    if (entries.length === 0) return;
    if (!ctx.db.isTransaction)
      throw new Error(`event ${entries[0]!.type}: emit it inside the transaction of the change`);
    const rows = this.rows(ctx, entries);
    // A keyed request holds its events back, to append them with its stored response (core/context.ts).
    const held = requestTransactionOf(ctx.db)?.defer(
      rows,
      async (r) => void (await append(ctx.db, { rows: r as EventInsert[] })),
    );
    if (!held) await append(ctx.db, { rows });
  }

  rows(ctx: ServiceContext, entries: Array<EventEntry & EventOptions>): EventInsert[] {
    const actor = actorOf(ctx);
    const rows = entries.map((entry): EventInsert => {
      if (!TYPE.test(entry.type)) throw new Error(`event type ${JSON.stringify(entry.type)} is not a dotted name`);
      return {
        account_id: ctx.access.ownerId,
        type: entry.type,
        area: entry.area,
        occurred_at: ctx.now,
        actor: entry.anonymous && actor.kind === 'friend' ? { kind: 'friend', id: null } : actor,
        data: entry.data,
        about_account_id: entry.about ?? null,
      };
    });
    if (ctx.keyed) keyedRows.set(rows, ctx.keyed);
    return rows;
  }
}

/** A row as the contract's Event. */
export function toEvent(row: EventRow): Event {
  return {
    id: String(row.id),
    type: row.type,
    occurredAt: row.occurred_at,
    accountId: row.account_id,
    actor: row.actor,
    data: row.data,
  } as Event;
}
