/**
 * The audit log: `ctx.audit.record(ctx, entry)` inserts one row into `audit_events` with
 * `ctx.db`, which must be the transaction of the audited write (see inTransaction in
 * server/core/context.ts), so the action and its record commit together or not at all.
 *
 * The account is the context's owner; the actor is the key (its id), the operator or a job. The
 * owner-side read route arrives with the privacy issue; until then operators read the table.
 */
import { randomUUID } from 'node:crypto';
import type { AuditEntry, AuditSink, ServiceContext } from '../core/context.ts';

/** Serialised detail larger than this is a programming error, not something to store. */
export const MAX_DETAIL_BYTES = 2048;
const ACTION = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/;

export class DatabaseAuditSink implements AuditSink {
  async record(ctx: ServiceContext, entry: AuditEntry): Promise<void> {
    if (!ctx.db.isTransaction) throw new Error(`audit ${entry.action}: record it inside the transaction of the audited write`);
    if (!ACTION.test(entry.action)) throw new Error(`audit action ${JSON.stringify(entry.action)} is not a dotted lower-case verb`);
    const detail = JSON.stringify(entry.detail ?? {});
    if (Buffer.byteLength(detail) > MAX_DETAIL_BYTES) throw new Error(`audit ${entry.action}: detail is over ${MAX_DETAIL_BYTES} bytes`);
    const actor = ctx.actor;
    await ctx.db('audit_events').insert({
      id: randomUUID(),
      user_id: ctx.access.ownerId,
      actor_kind: actor.kind,
      actor_key_id: actor.kind === 'key' ? actor.keyId : null,
      actor_job: actor.kind === 'system' ? actor.job : null,
      action: entry.action,
      target_type: entry.targetType,
      target_id: entry.targetId,
      detail,
      created_at: ctx.now,
    });
  }
}
