/**
 * The SQL of webhooks and their deliveries (generated/sql/webhooks.sql). Deliveries are queued by
 * the event log's append (server/events/log.ts); here they are read, sent in id order per webhook,
 * retried and pruned.
 */
import type { Knex } from 'knex';
import type { KeyedStatement } from '../../core/context.ts';
import { auditInsertSql, EXAMPLE_AUDIT, type PendingAudit } from '../../audit/index.ts';
import type { EventRow } from '../../events/log.ts';
import { WEBHOOK_QUEUE } from '../../events/log.ts';
import { sql } from '../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../db/statements.ts';
import { answerUnderKey, exampleKeyed } from '../../idempotency/inStatement.ts';
import { enqueueRows } from '../../jobs/queue.ts';

export interface WebhookRow {
  id: string;
  user_id: string;
  types: string[];
  areas: string[];
  description: string | null;
  enabled: boolean;
  disabled_reason: 'manual' | 'gone' | 'failing' | null;
  disabled_at: number | null;
  failing_since: number | null;
  last_success_at: number | null;
  previous_secret_expires_at: number | null;
  key_id: string;
  secrets_enc: Uint8Array;
  created_at: number;
  updated_at: number;
}

export interface DeliveryRow {
  id: number;
  webhook_id: string;
  event_id: number | null;
  message_id: string;
  type: string;
  state: 'pending' | 'succeeded' | 'failed';
  attempts: number;
  status_code: number | null;
  duration_ms: number | null;
  error: string | null;
  last_attempt_at: number | null;
  next_attempt_at: number | null;
  created_at: number;
}

/** What an update may change (updated_at always). */
export interface WebhookChanges {
  types?: string[];
  areas?: string[];
  description?: string | null;
  /** `false` disables it as `manual`; `true` enables it and restarts its failing clock. */
  enabled?: boolean;
  sealed?: { key_id: string; data: Buffer };
  updated_at: number;
}

/** The outcome of one attempt, as recorded. */
export interface AttemptRecord {
  deliveryId: number;
  now: number;
  ok: boolean;
  /** 410 Gone: the webhook is disabled at once. */
  gone: boolean;
  /** The delivery ends (success, out of attempts, or not sendable); otherwise it is due again at `nextAttemptAt`. */
  final: boolean;
  nextAttemptAt: number | null;
  statusCode: number | null;
  durationMs: number;
  error: string | null;
  /** A failure when the webhook has had no success since this long ago disables it. */
  disableAfterMs: number;
}

const AREA = 'webhooks';
const COLUMNS = sql`id, user_id, types, areas, description, enabled, disabled_reason, disabled_at, failing_since,
  last_success_at, previous_secret_expires_at, key_id, secrets_enc, created_at, updated_at`;
const W_COLUMNS = sql`w.id, w.user_id, w.types, w.areas, w.description, w.enabled, w.disabled_reason, w.disabled_at,
  w.failing_since, w.last_success_at, w.previous_secret_expires_at, w.key_id, w.secrets_enc, w.created_at, w.updated_at`;
const DELIVERY = sql`d.id, d.webhook_id, d.event_id, d.message_id, d.type, d.state, d.attempts, d.status_code,
  d.duration_ms, d.error, d.last_attempt_at, d.next_attempt_at, d.created_at`;
/** The delivery job of each webhook `from` names (a FROM item with `webhook_id`), queued unless one is pending or running (the key of server/events/log.ts). */
const queueJobs = (from: string, now: number) =>
  enqueueRows(
    WEBHOOK_QUEUE,
    sql`select jsonb_build_object('webhookId', webhook_id) as payload, 'webhook:' || webhook_id as key from ${sql.id(from)}`,
    sql`${now}::bigint`,
  );

const list = statement<{ userId: string }, WebhookRow>({
  name: 'webhooks_list',
  area: AREA,
  variants: { 'an account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) => sql`select ${COLUMNS} from webhooks where user_id = ${userId} order by created_at, id`,
});

const find = statement<{ userId: string; id: string }, WebhookRow>({
  name: 'webhooks_find',
  area: AREA,
  variants: { 'a webhook': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID } },
  build: ({ userId, id }) => sql`select ${COLUMNS} from webhooks where id = ${id} and user_id = ${userId}`,
});

/** A webhook to create: the columns the insert sets. */
export type NewWebhook = Pick<
  WebhookRow,
  'id' | 'user_id' | 'types' | 'areas' | 'description' | 'key_id' | 'created_at' | 'updated_at'
> & {
  secrets_enc: Buffer;
};

const EXAMPLE_WEBHOOK: NewWebhook = {
  id: EXAMPLE_UUID,
  user_id: EXAMPLE_UUID,
  types: [],
  areas: [],
  description: null,
  key_id: 'k',
  secrets_enc: Buffer.alloc(0),
  created_at: 0,
  updated_at: 0,
};

/**
 * A webhook created in one statement (docs/data-access.md, "Writes in one statement"): the account
 * key-share-locked first (as the insert's foreign key would, before the counter: an account
 * deletion locks the account, then its counter), then its webhook_counts row (migration 0033),
 * inserted or updated only while under `max` — a row a concurrent create has just counted is
 * re-checked on its committed version, so two creates cannot both take the last slot. The webhook
 * and its audit row are written only then; no row when the account is at the cap. A request keyed
 * stores its answer under the key in the same statement (answerUnderKey).
 */
const create = statement<
  { row: NewWebhook; max: number; audit: PendingAudit; keyed?: KeyedStatement },
  WebhookRow & { answered?: boolean }
>({
  name: 'webhooks_create',
  area: AREA,
  variants: {
    'a webhook': { max: 20, audit: EXAMPLE_AUDIT, row: EXAMPLE_WEBHOOK },
    'a webhook with its keyed answer': { max: 20, audit: EXAMPLE_AUDIT, row: EXAMPLE_WEBHOOK, keyed: exampleKeyed() },
  },
  build: ({ row, max, audit, keyed }) => {
    const answer = answerUnderKey(keyed, sql`exists (select 1 from inserted)`);
    return sql`with account as (
      select a.id from accounts a where a.id = ${row.user_id}::uuid for key share
    ),
    slot as (
      insert into webhook_counts as c (user_id) select a.id from account a
      on conflict (user_id) do update set n = c.n where c.n < ${max}::int
      returning c.user_id
    ),
    inserted as (
      insert into webhooks (id, user_id, types, areas, description, enabled, key_id, secrets_enc, created_at, updated_at)
      select ${row.id}::uuid, s.user_id, ${row.types}::text[], ${row.areas}::text[], ${row.description}::text, true,
        ${row.key_id}::text, ${row.secrets_enc}::bytea, ${row.created_at}::bigint, ${row.updated_at}::bigint
      from slot s
      returning ${COLUMNS}
    ),${answer.ctes}
    audited as (${auditInsertSql(audit, sql`'{}'::jsonb`, sql`inserted`)})
    select ${COLUMNS}${answer.answered} from inserted`;
  },
});

/** One text whatever the changed columns: each is kept or set by a bound flag. */
const update = statement<{ userId: string; id: string; changes: WebhookChanges }, WebhookRow>({
  name: 'webhooks_update',
  area: AREA,
  variants: { 'any set of changes': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, changes: { updated_at: 0 } } },
  build: ({ userId, id, changes: c }) => {
    const has = (set: boolean) => sql`${set}::boolean`;
    const enable = c.enabled === true;
    const disable = c.enabled === false;
    // Turned on again: its pending deliveries are due now, not at the backoff they were waiting out
    // (the statement's snapshot still sees the webhook disabled).
    return sql`with resumed as (
        update webhook_deliveries set next_attempt_at = least(next_attempt_at, ${c.updated_at}::bigint)
        where ${has(enable)} and state = 'pending' and webhook_id = (
          select id from webhooks where id = ${id} and user_id = ${userId} and not enabled
        )
      )
      update webhooks set
        types = case when ${has(c.types !== undefined)} then ${c.types ?? null}::text[] else types end,
        areas = case when ${has(c.areas !== undefined)} then ${c.areas ?? null}::text[] else areas end,
        description = case when ${has(c.description !== undefined)} then ${c.description ?? null}::text else description end,
        key_id = case when ${has(c.sealed !== undefined)} then ${c.sealed?.key_id ?? null}::text else key_id end,
        secrets_enc = case when ${has(c.sealed !== undefined)} then ${c.sealed?.data ?? null}::bytea else secrets_enc end,
        enabled = case when ${has(enable)} then true when ${has(disable)} then false else enabled end,
        disabled_reason = case when ${has(enable)} then null when ${has(disable)} and enabled then 'manual' else disabled_reason end,
        disabled_at = case when ${has(enable)} then null when ${has(disable)} and enabled then ${c.updated_at}::bigint else disabled_at end,
        failing_since = case when ${has(enable)} and not enabled then null else failing_since end,
        updated_at = ${c.updated_at}::bigint
      where id = ${id} and user_id = ${userId}
      returning ${COLUMNS}`;
  },
});

/** A new sealed secret set, the previous secret kept until `previousExpiresAt`. */
const rotate = statement<
  { userId: string; id: string; keyId: string; data: Buffer; previousExpiresAt: number; now: number },
  { id: string }
>({
  name: 'webhooks_rotate',
  area: AREA,
  variants: {
    'a webhook': {
      userId: EXAMPLE_UUID,
      id: EXAMPLE_UUID,
      keyId: 'k',
      data: Buffer.alloc(0),
      previousExpiresAt: 0,
      now: 0,
    },
  },
  build: ({ userId, id, keyId, data, previousExpiresAt, now }) => sql`update webhooks
    set key_id = ${keyId}, secrets_enc = ${data}, previous_secret_expires_at = ${previousExpiresAt}, updated_at = ${now}
    where id = ${id} and user_id = ${userId}
    returning id`,
});

const remove = statement<{ userId: string; id: string }, { id: string }>({
  name: 'webhooks_delete',
  area: AREA,
  variants: { 'a webhook': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID } },
  build: ({ userId, id }) => sql`delete from webhooks where id = ${id} and user_id = ${userId} returning id`,
});

/**
 * A page of a webhook's deliveries, newest first, before a delivery id: no row at all when the
 * webhook is not the account's, one row of nulls when it has none.
 */
const deliveries = statement<
  { userId: string; webhookId: string; before: number | null; limit: number },
  DeliveryRow | { [K in keyof DeliveryRow]: null }
>({
  name: 'webhooks_deliveries',
  area: AREA,
  variants: {
    'first page': { userId: EXAMPLE_UUID, webhookId: EXAMPLE_UUID, before: null, limit: 50 },
    'a later page': { userId: EXAMPLE_UUID, webhookId: EXAMPLE_UUID, before: 1, limit: 50 },
  },
  build: ({ userId, webhookId, before, limit }) => sql`select ${DELIVERY}
    from webhooks w
    left join lateral (
      select * from webhook_deliveries d
      where d.webhook_id = w.id${before === null ? sql.empty : sql` and d.id < ${before}::bigint`}
      order by d.id desc limit ${limit}
    ) d on true
    where w.id = ${webhookId} and w.user_id = ${userId}
    order by d.id desc`,
});

/** Makes a delivery of the account's webhook due now with a fresh set of attempts, and queues the webhook's job. */
const retry = statement<{ userId: string; webhookId: string; deliveryId: number; now: number }, DeliveryRow>({
  name: 'webhooks_retry',
  area: AREA,
  variants: { 'a delivery': { userId: EXAMPLE_UUID, webhookId: EXAMPLE_UUID, deliveryId: 1, now: 0 } },
  build: ({ userId, webhookId, deliveryId, now }) => sql`with retried as (
      update webhook_deliveries d
      set state = 'pending', attempts = 0, next_attempt_at = ${now}::bigint, ended_at = null
      from webhooks w
      where d.id = ${deliveryId}::bigint and d.webhook_id = w.id and w.id = ${webhookId}::uuid and w.user_id = ${userId}::uuid
      returning ${DELIVERY}
    ),
    queued as (${queueJobs('retried', now)})
    select * from retried`,
});

/** Records a test ping's attempt; the row. */
const insertPing = statement<
  {
    webhookId: string;
    messageId: string;
    ok: boolean;
    statusCode: number | null;
    durationMs: number;
    error: string | null;
    now: number;
  },
  DeliveryRow
>({
  name: 'webhooks_insert_ping',
  area: AREA,
  variants: {
    'a ping': {
      webhookId: EXAMPLE_UUID,
      messageId: 'ping_x',
      ok: true,
      statusCode: null,
      durationMs: 0,
      error: null,
      now: 0,
    },
  },
  build: ({ webhookId, messageId, ok, statusCode, durationMs, error, now }) => sql`insert into webhook_deliveries as d
      (webhook_id, event_id, message_id, type, state, attempts, status_code, duration_ms, error, last_attempt_at, created_at, ended_at)
    values (${webhookId}::uuid, null, ${messageId}::text, 'ping', case when ${ok}::boolean then 'succeeded' else 'failed' end, 1,
      ${statusCode}::int, ${durationMs}::int, ${error}::text, ${now}::bigint, ${now}::bigint, ${now}::bigint)
    returning ${DELIVERY}`,
});

/**
 * A webhook as its delivery job reads it (no account scoping: the job is the server's), with its
 * oldest pending delivery and that delivery's event (null when the log no longer keeps it, or for a
 * ping); no row when the webhook is gone.
 */
const next = statement<{ webhookId: string }, WebhookRow & { head: (DeliveryRow & { event: EventRow | null }) | null }>(
  {
    name: 'webhooks_next',
    area: AREA,
    variants: { 'a webhook': { webhookId: EXAMPLE_UUID } },
    build: ({ webhookId }) => sql`select ${W_COLUMNS},
      case when d.id is null then null else jsonb_build_object(
        'id', d.id, 'webhook_id', d.webhook_id, 'event_id', d.event_id, 'message_id', d.message_id, 'type', d.type,
        'state', d.state, 'attempts', d.attempts, 'status_code', d.status_code, 'duration_ms', d.duration_ms,
        'error', d.error, 'last_attempt_at', d.last_attempt_at, 'next_attempt_at', d.next_attempt_at,
        'created_at', d.created_at,
        'event', case when e.id is null then null else jsonb_build_object(
          'id', e.id, 'account_id', e.account_id, 'type', e.type, 'area', e.area,
          'occurred_at', e.occurred_at, 'actor', e.actor, 'data', e.data) end) end as head
    from webhooks w
    left join lateral (
      select * from webhook_deliveries where webhook_id = w.id and state = 'pending' order by id limit 1
    ) d on true
    left join events e on e.id = d.event_id
    where w.id = ${webhookId}`,
  },
);

/** One attempt's outcome on the delivery, and on the webhook's health (success, failing since, disabled). */
const recordAttempt = statement<AttemptRecord, { enabled: boolean }>({
  name: 'webhooks_record_attempt',
  area: AREA,
  variants: {
    'an attempt': {
      deliveryId: 1,
      now: 0,
      ok: true,
      gone: false,
      final: true,
      nextAttemptAt: null,
      statusCode: null,
      durationMs: 0,
      error: null,
      disableAfterMs: 0,
    },
  },
  build: (a) => sql`with attempted as (
      update webhook_deliveries set
        state = case when ${a.ok}::boolean then 'succeeded' when ${a.final}::boolean then 'failed' else 'pending' end,
        attempts = attempts + 1,
        status_code = ${a.statusCode}::int,
        duration_ms = ${a.durationMs}::int,
        error = ${a.error}::text,
        last_attempt_at = ${a.now}::bigint,
        next_attempt_at = case when ${a.final}::boolean then null else ${a.nextAttemptAt}::bigint end,
        ended_at = case when ${a.final}::boolean then ${a.now}::bigint else null end
      where id = ${a.deliveryId}::bigint and state = 'pending'
      returning webhook_id
    )
    update webhooks w set
      last_success_at = case when ${a.ok}::boolean then ${a.now}::bigint else last_success_at end,
      failing_since = case when ${a.ok}::boolean then null else coalesce(failing_since, ${a.now}::bigint) end,
      enabled = enabled and not ${a.gone}::boolean
        and (${a.ok}::boolean or ${a.now}::bigint - coalesce(failing_since, ${a.now}::bigint) < ${a.disableAfterMs}::bigint),
      disabled_reason = case
        when not enabled then disabled_reason
        when ${a.gone}::boolean then 'gone'
        when not ${a.ok}::boolean and ${a.now}::bigint - coalesce(failing_since, ${a.now}::bigint) >= ${a.disableAfterMs}::bigint then 'failing'
        else disabled_reason end,
      disabled_at = case
        when not enabled then disabled_at
        when ${a.gone}::boolean or (not ${a.ok}::boolean and ${a.now}::bigint - coalesce(failing_since, ${a.now}::bigint) >= ${a.disableAfterMs}::bigint) then ${a.now}::bigint
        else disabled_at end
    from attempted
    where w.id = attempted.webhook_id
    returning w.enabled`,
});

/**
 * Queues the delivery job of every enabled webhook whose oldest pending delivery is due. Read from
 * the pending deliveries (few, on their partial index), not from every webhook.
 */
const sweep = statement<{ now: number }, never>({
  name: 'webhooks_sweep',
  area: AREA,
  variants: { now: { now: 0 } },
  build: ({ now }) => sql`with heads as (
      select distinct on (d.webhook_id) d.webhook_id, d.next_attempt_at
      from webhook_deliveries d
      where d.state = 'pending'
      order by d.webhook_id, d.id
    ),
    due as (
      select h.webhook_id from heads h
      join webhooks w on w.id = h.webhook_id and w.enabled
      where h.next_attempt_at <= ${now}::bigint
    )
    ${queueJobs('due', now)}`,
});

/** Deletes ended deliveries older than `before` (a batch at a time); how many went. */
const prune = statement<{ before: number; size: number }, { n: number }>({
  name: 'webhooks_prune_deliveries',
  area: AREA,
  variants: { one: { before: 0, size: 10_000 } },
  build: ({ before, size }) => sql`with gone as (
      delete from webhook_deliveries where id in (
        select id from webhook_deliveries where state <> 'pending' and ended_at < ${before}::bigint limit ${size}
      ) returning 1
    )
    select count(*)::int as n from gone`,
});

export const webhooksRepo = {
  list: (db: Knex, userId: string) => list(db, { userId }),
  find: async (db: Knex, userId: string, id: string): Promise<WebhookRow | undefined> =>
    (await find(db, { userId, id }))[0],
  /** Creates the webhook with its audit row in one statement; undefined when the account already has `max`. */
  /** The webhook, or undefined at the cap; `keyed`: a keyed request, whose answer the statement stores (answerUnderKey). */
  create: async (
    db: Knex,
    row: NewWebhook,
    max: number,
    audit: PendingAudit,
    keyed?: KeyedStatement,
  ): Promise<(WebhookRow & { answered?: boolean }) | undefined> => (await create(db, { row, max, audit, keyed }))[0],
  update: async (db: Knex, userId: string, id: string, changes: WebhookChanges): Promise<WebhookRow | undefined> =>
    (await update(db, { userId, id, changes }))[0],
  rotate: async (db: Knex, p: Parameters<typeof rotate>[1]): Promise<boolean> => (await rotate(db, p)).length > 0,
  delete: async (db: Knex, userId: string, id: string): Promise<boolean> =>
    (await remove(db, { userId, id })).length > 0,
  /** Null when the webhook is not the account's. */
  async deliveries(
    db: Knex,
    userId: string,
    webhookId: string,
    before: number | null,
    limit: number,
  ): Promise<DeliveryRow[] | null> {
    const rows = await deliveries(db, { userId, webhookId, before, limit });
    if (rows.length === 0) return null;
    return rows.filter((r): r is DeliveryRow => r.id !== null);
  },
  retry: async (db: Knex, p: Parameters<typeof retry>[1]): Promise<DeliveryRow | undefined> => (await retry(db, p))[0],
  insertPing: async (db: Knex, p: Parameters<typeof insertPing>[1]): Promise<DeliveryRow> =>
    (await insertPing(db, p))[0]!,
  next: async (db: Knex, webhookId: string) => (await next(db, { webhookId }))[0],
  /** Whether the webhook is still enabled after it. */
  recordAttempt: async (db: Knex, a: AttemptRecord): Promise<boolean> =>
    (await recordAttempt(db, a))[0]?.enabled ?? false,
  sweep: async (db: Knex, now: number) => void (await sweep(db, { now })),
  async pruneDeliveries(db: Knex, before: number): Promise<number> {
    let total = 0;
    for (;;) {
      const n = (await prune(db, { before, size: 10_000 }))[0]?.n ?? 0;
      total += n;
      if (n < 10_000) return total;
    }
  },
};
