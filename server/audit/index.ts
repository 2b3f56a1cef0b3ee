/**
 * The audit log: `ctx.audit.record(ctx, entry)` inserts one row into `audit_events` with
 * `ctx.db`, which must be the transaction of the audited write (see inTransaction in
 * server/core/context.ts), so the action and its record commit together or not at all.
 *
 * The account is the context's owner; the actor is the key (its id), the operator or a job. The
 * owner reads its log through GET /api/v1/audit (listAuditEvents).
 */
import { randomUUID } from 'node:crypto';
import type { components } from '../../generated/api.d.ts';
import type { AuditEntry, AuditSink, PendingAudit, ServiceContext } from '../core/context.ts';
import { decodeCursor, encodeCursor } from '../core/cursor.ts';
import { type Keyset, keysetAfterSql, keysetOrderSql, pageOf } from '../core/keyset.ts';
import { type Sql, sql } from '../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../db/statements.ts';

/** Serialised detail larger than this is a programming error, not something to store. */
export const MAX_DETAIL_BYTES = 2048;
const ACTION = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/;
const AREA = 'audit';

interface AuditInsert extends PendingAudit {
  /** JSON text. */
  detail: string;
}

/** An audit row for the statements' example variants (generated/sql/). */
export const EXAMPLE_AUDIT: PendingAudit = {
  id: EXAMPLE_UUID,
  user_id: EXAMPLE_UUID,
  actor_kind: 'key',
  actor_key_id: EXAMPLE_UUID,
  actor_job: null,
  action: 'a.b',
  target_type: 't',
  target_id: null,
  created_at: 0,
};

const insertEvent = statement<{ row: AuditInsert }, never>({
  name: 'audit_record',
  area: AREA,
  variants: {
    'one event': { row: { ...EXAMPLE_AUDIT, detail: '{}' } },
  },
  build: ({ row: r }) => sql`insert into audit_events
      (id, user_id, actor_kind, actor_key_id, actor_job, action, target_type, target_id, detail, created_at)
    values (${r.id}::uuid, ${r.user_id}::uuid, ${r.actor_kind}::text, ${r.actor_key_id}::uuid, ${r.actor_job}::text,
      ${r.action}::text, ${r.target_type}::text, ${r.target_id}::text, ${r.detail}::jsonb, ${r.created_at}::bigint)`,
});

export type { PendingAudit };

/** The row of `entry` but its detail: the context's account, its actor and time (what record() writes). */
function auditRow(ctx: ServiceContext, entry: Omit<AuditEntry, 'detail'>): PendingAudit {
  if (!ACTION.test(entry.action))
    throw new Error(`audit action ${JSON.stringify(entry.action)} is not a dotted lower-case verb`);
  const actor = ctx.actor;
  return {
    id: randomUUID(),
    user_id: ctx.access.ownerId,
    actor_kind: actor.kind,
    actor_key_id: actor.kind === 'key' ? actor.keyId : null,
    actor_job: actor.kind === 'system' ? actor.job : null,
    action: entry.action,
    target_type: entry.targetType,
    target_id: entry.targetId,
    created_at: ctx.now,
  };
}

/**
 * The insert of `row` (auditRow) as the body of a CTE, for a write made in one statement
 * (docs/data-access.md, "Writes in one statement"): `detail` is a jsonb expression of that
 * statement (a value it read under its lock, such as the one it replaces), and the row is inserted
 * once per row of `from` (none: the write did not happen, nothing is audited). Such a detail is
 * small by construction, so record()'s size check is not made.
 */
export function auditInsertSql(row: PendingAudit, detail: Sql, from: Sql): Sql {
  return sql`insert into audit_events
      (id, user_id, actor_kind, actor_key_id, actor_job, action, target_type, target_id, detail, created_at)
    select ${row.id}::uuid, ${row.user_id}::uuid, ${row.actor_kind}::text, ${row.actor_key_id}::uuid, ${row.actor_job}::text,
      ${row.action}::text, ${row.target_type}::text, ${row.target_id}::text, ${detail}, ${row.created_at}::bigint
    from ${from}`;
}

export class DatabaseAuditSink implements AuditSink {
  async record(ctx: ServiceContext, entry: AuditEntry): Promise<void> {
    if (!ctx.db.isTransaction)
      throw new Error(`audit ${entry.action}: record it inside the transaction of the audited write`);
    const row = auditRow(ctx, entry);
    const detail = JSON.stringify(entry.detail ?? {});
    if (Buffer.byteLength(detail) > MAX_DETAIL_BYTES)
      throw new Error(`audit ${entry.action}: detail is over ${MAX_DETAIL_BYTES} bytes`);
    await insertEvent(ctx.db, { row: { ...row, detail } });
  }

  row(ctx: ServiceContext, entry: Omit<AuditEntry, 'detail'>): PendingAudit {
    return auditRow(ctx, entry);
  }
}

interface AuditRow {
  id: string;
  action: string;
  target_type: string;
  target_id: string | null;
  actor_kind: 'key' | 'operator' | 'system';
  actor_key_id: string | null;
  detail: Record<string, unknown> | string;
  created_at: number;
}

/** Newest first on the audit_events_by_account index (user_id, created_at desc, id desc). */
const NEWEST_FIRST: Keyset = {
  columns: [
    { sql: sql`created_at`, type: 'bigint' },
    { sql: sql`id`, type: 'uuid' },
  ],
  direction: 'desc',
};

/** One page of the account's entries, newest first, optionally those whose action starts with `actionPrefix`. */
const listEvents = statement<
  { userId: string; size: number; after?: readonly [number, string] | undefined; actionPrefix?: string | undefined },
  AuditRow
>({
  name: 'audit_list',
  area: AREA,
  variants: {
    'the first page': { userId: EXAMPLE_UUID, size: 50 },
    'a following page': { userId: EXAMPLE_UUID, size: 50, after: [0, EXAMPLE_UUID] },
    'the first page of a prefix': { userId: EXAMPLE_UUID, size: 50, actionPrefix: 'a.' },
    'a following page of a prefix': { userId: EXAMPLE_UUID, size: 50, after: [0, EXAMPLE_UUID], actionPrefix: 'a.' },
  },
  build: ({
    userId,
    size,
    after,
    actionPrefix,
  }) => sql`select id, action, target_type, target_id, actor_kind, actor_key_id, detail, created_at
    from audit_events
    where user_id = ${userId}${actionPrefix === undefined ? sql.empty : sql` and starts_with(action, ${actionPrefix}::text)`}${after ? sql` and ${keysetAfterSql(NEWEST_FIRST, after)}` : sql.empty}
    ${keysetOrderSql(NEWEST_FIRST, size)}`,
});

/**
 * The owner's read of its own audit log (GET /api/v1/audit): one keyset page, newest first, of the
 * context owner's entries only, optionally those whose action starts with `actionPrefix`. The
 * cursor is the last entry's (created_at, id).
 */
export async function listAuditEvents(
  ctx: ServiceContext,
  input: { limit: number; cursor?: string; actionPrefix?: string },
): Promise<components['schemas']['AuditEventPage']> {
  const after = input.cursor ? decodeCursor<[number, string]>(input.cursor, ['integer', 'uuid']) : undefined;
  const rows = await listEvents(ctx.db, {
    userId: ctx.access.ownerId,
    size: input.limit,
    after,
    actionPrefix: input.actionPrefix,
  });
  const { items, nextAfter } = pageOf(rows, input.limit);
  return {
    items: items.map((r) => ({
      id: r.id,
      action: r.action,
      targetType: r.target_type,
      targetId: r.target_id,
      actorKind: r.actor_kind,
      actorKeyId: r.actor_key_id,
      detail: typeof r.detail === 'string' ? (JSON.parse(r.detail) as Record<string, unknown>) : r.detail,
      createdAt: r.created_at,
    })),
    nextCursor: nextAfter ? encodeCursor([nextAfter.created_at, nextAfter.id]) : null,
  };
}
