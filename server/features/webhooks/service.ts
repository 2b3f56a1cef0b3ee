/**
 * Webhooks (docs/webhooks.md): endpoints that receive the account's events as signed POSTs. The
 * URL and secrets are sealed with the message keyring; the types a webhook takes are limited to
 * what the key that set them can read, and the areas that key could read are kept with them (the
 * event log queues an event only for a webhook that may read its area).
 */
import { randomUUID } from 'node:crypto';
import { isIP } from 'node:net';
import type { components } from '../../../generated/api.d.ts';
import { inTransaction, oneStatement, ownerOf, type PresetId, type ServiceContext } from '../../core/context.ts';
import { badRequest, conflict, notFound } from '../../core/errors.ts';
import { hasScope, SCOPES, type Scope } from '../../core/scopes.ts';
import { MessageCipher } from '../../crypto/messageCipher.ts';
import { addressAllowList, isPublicAddress } from '../../net/addresses.ts';
import { attempt, openSealed, openTarget, pingBody, type Sealed } from './delivery.ts';
import { newSecret } from './signing.ts';
import { type DeliveryRow, type NewWebhook, type WebhookChanges, type WebhookRow, webhooksRepo } from './repo.ts';

type Schemas = components['schemas'];
type WebhookEventType = Schemas['WebhookEventType'];

/** An account's webhooks at most. */
export const MAX_WEBHOOKS = 20;
/** How long a rotated-out secret keeps signing beside the new one. */
const PREVIOUS_SECRET_MS = 24 * 3_600_000;

/** The scopes whose read grant lets a key see events of a type (any one of them, for `trash.purged`). */
const AREAS_BY_PREFIX: Record<string, readonly Scope[]> = {
  member: ['members'],
  import: ['members'],
  front: ['front'],
  front_session: ['front'],
  entry: ['entries'],
  group: ['groups'],
  folder: ['groups'],
  custom_field: ['customFields'],
  custom_field_value: ['customFields'],
  message: ['messaging'],
  space: ['messaging'],
  category: ['messaging'],
  channel: ['messaging'],
  friendship: ['friends'],
  member_status: ['memberStatuses'],
  privacy_bucket: ['privacyBuckets'],
  trash: ['groups', 'customFields', 'front'],
  appearance: ['appearance'],
  terminology: ['terminology'],
  guestbook: ['guestbook'],
  poll: ['poll'],
  social_profile: ['social'],
  layout: ['groups'],
  side_system: ['systems'],
  sub_system: ['systems'],
  system_scope: ['systems'],
};

function areasOf(type: string): readonly Scope[] {
  const areas = AREAS_BY_PREFIX[type.slice(0, type.indexOf('.'))];
  if (!areas) throw new Error(`event type ${type} has no area`);
  return areas;
}

/** The scopes the calling key reads; 400 when it cannot read one of `types`. */
function readableAreas(ctx: ServiceContext, types: readonly string[]): Scope[] {
  const { actor } = ctx;
  const scopes = actor.kind === 'key' ? actor.scopes : {};
  const readable = SCOPES.filter((s) => hasScope(scopes, s, 'read'));
  for (const type of types) {
    const areas = areasOf(type);
    if (!areas.some((a) => readable.includes(a)))
      throw badRequest(`The key cannot read the events of type ${type} (it needs ${areas.join(' or ')}:read)`);
  }
  return readable;
}

/** The URL's own checks (the guarded fetcher checks the resolved addresses at every delivery). */
function checkUrl(ctx: ServiceContext, raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw badRequest('url is not a valid URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw badRequest('url must be http or https');
  if (url.username || url.password)
    throw badRequest('url must not carry credentials: deliveries are authenticated by their signature');
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const allowed = addressAllowList(ctx.config.fetchAllowAddresses);
  if (!ctx.config.fetchAllowPrivate && isIP(host) !== 0 && !isPublicAddress(host) && !allowed(host))
    throw badRequest('url points to a private or reserved address, which this server does not deliver to');
  return url.href;
}

const cipherOf = (ctx: Pick<ServiceContext, 'config'>) => new MessageCipher(ctx.config.messageEncryptionKeys);

function seal(ctx: Pick<ServiceContext, 'config'>, row: { user_id: string; id: string }, value: Sealed) {
  const sealed = cipherOf(ctx).seal(row.user_id, row.id, JSON.stringify(value));
  return { key_id: sealed.keyId, data: sealed.data };
}

function toWebhook(ctx: ServiceContext, row: WebhookRow): Schemas['Webhook'] {
  const { url } = openSealed(ctx.config, row);
  return {
    id: row.id,
    url,
    types: row.types as WebhookEventType[],
    description: row.description,
    enabled: row.enabled,
    disabledReason: row.disabled_reason,
    disabledAt: row.disabled_at,
    failingSince: row.failing_since,
    lastSuccessAt: row.last_success_at,
    previousSecretExpiresAt:
      row.previous_secret_expires_at !== null && row.previous_secret_expires_at > ctx.now
        ? row.previous_secret_expires_at
        : null,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export function toDelivery(row: DeliveryRow): Schemas['WebhookDelivery'] {
  return {
    id: String(row.id),
    eventId: row.event_id === null ? null : String(row.event_id),
    type: row.type,
    state: row.state,
    attempts: row.attempts,
    statusCode: row.status_code,
    durationMs: row.duration_ms,
    error: row.error,
    lastAttemptAt: row.last_attempt_at,
    nextAttemptAt: row.state === 'pending' ? row.next_attempt_at : null,
    createdAt: row.created_at,
  };
}

async function findWebhook(ctx: ServiceContext, id: string): Promise<WebhookRow> {
  const row = await webhooksRepo.find(ctx.db, ownerOf(ctx), id);
  if (!row) throw notFound('Webhook not found');
  return row;
}

export async function listWebhooks(ctx: ServiceContext): Promise<Schemas['Webhook'][]> {
  return (await webhooksRepo.list(ctx.db, ownerOf(ctx))).map((row) => toWebhook(ctx, row));
}

export async function getWebhook(ctx: ServiceContext, id: string): Promise<Schemas['Webhook']> {
  return toWebhook(ctx, await findWebhook(ctx, id));
}

export async function createWebhook(
  ctx: ServiceContext,
  input: Schemas['CreateWebhookRequest'] & PresetId,
): Promise<Schemas['CreatedWebhook']> {
  const userId = ownerOf(ctx);
  const areas = readableAreas(ctx, input.types);
  const url = checkUrl(ctx, input.url);
  const secret = newSecret();
  const id = input.id ?? randomUUID();
  const sealed = seal(ctx, { user_id: userId, id }, { url, secrets: [secret] });
  // One statement: the cap on the account's counter row, the webhook and its audit row (webhooksRepo.create).
  const audit = ctx.audit.row(ctx, { action: 'webhook.create', targetType: 'webhook', targetId: id });
  const created: NewWebhook = {
    id,
    user_id: userId,
    types: input.types,
    areas,
    description: input.description ?? null,
    key_id: sealed.key_id,
    secrets_enc: sealed.data,
    created_at: ctx.now,
    updated_at: ctx.now,
  };
  // The answer when the statement writes, known before it: a keyed create stores it under the key there.
  const answer = {
    webhook: toWebhook(ctx, {
      ...created,
      enabled: true,
      disabled_reason: null,
      disabled_at: null,
      failing_since: null,
      last_success_at: null,
      previous_secret_expires_at: null,
    }),
    secret,
  };
  const row = await oneStatement(ctx, (db) => webhooksRepo.create(db, created, MAX_WEBHOOKS, audit, ctx.keyed), {
    body: answer,
  });
  if (!row) throw conflict(`An account has at most ${MAX_WEBHOOKS} webhooks`);
  return { webhook: toWebhook(ctx, row), secret };
}

export async function updateWebhook(
  ctx: ServiceContext,
  id: string,
  input: Schemas['UpdateWebhookRequest'],
): Promise<Schemas['Webhook']> {
  const userId = ownerOf(ctx);
  const changes: WebhookChanges = { updated_at: ctx.now };
  if (input.types !== undefined) {
    changes.areas = readableAreas(ctx, input.types);
    changes.types = input.types;
  }
  if (input.description !== undefined) changes.description = input.description;
  if (input.enabled !== undefined) changes.enabled = input.enabled;
  const url = input.url === undefined ? undefined : checkUrl(ctx, input.url);
  return inTransaction(ctx, async (tx) => {
    if (url !== undefined) {
      // The new URL is sealed with the secrets as they are.
      const current = await findWebhook(tx, id);
      changes.sealed = seal(ctx, current, { ...openSealed(ctx.config, current), url });
    }
    const row = await webhooksRepo.update(tx.db, userId, id, changes);
    if (!row) throw notFound('Webhook not found');
    await tx.audit.record(tx, {
      action: 'webhook.update',
      targetType: 'webhook',
      targetId: id,
      detail: { fields: Object.keys(input) },
    });
    return toWebhook(tx, row);
  });
}

export async function deleteWebhook(ctx: ServiceContext, id: string): Promise<void> {
  await inTransaction(ctx, async (tx) => {
    if (!(await webhooksRepo.delete(tx.db, ownerOf(tx), id))) throw notFound('Webhook not found');
    await tx.audit.record(tx, { action: 'webhook.delete', targetType: 'webhook', targetId: id });
  });
}

export async function rotateSecret(ctx: ServiceContext, id: string): Promise<Schemas['RotatedWebhookSecret']> {
  const userId = ownerOf(ctx);
  const secret = newSecret();
  const previousSecretExpiresAt = ctx.now + PREVIOUS_SECRET_MS;
  await inTransaction(ctx, async (tx) => {
    const current = await findWebhook(tx, id);
    const value = openSealed(ctx.config, current);
    // Only the secret that signed until now stays beside the new one.
    const sealed = seal(ctx, current, { url: value.url, secrets: [secret, value.secrets[0]!] });
    await webhooksRepo.rotate(tx.db, {
      userId,
      id,
      keyId: sealed.key_id,
      data: sealed.data,
      previousExpiresAt: previousSecretExpiresAt,
      now: ctx.now,
    });
    await tx.audit.record(tx, { action: 'webhook.rotate_secret', targetType: 'webhook', targetId: id });
  });
  return { secret, previousSecretExpiresAt };
}

/** Sends a `ping` now and records it; the attempt's outcome, success or not. */
export async function testWebhook(ctx: ServiceContext, id: string): Promise<Schemas['WebhookDelivery']> {
  const row = await findWebhook(ctx, id);
  const messageId = `ping_${randomUUID()}`;
  const outcome = await attempt(
    ctx.config,
    openTarget(ctx.config, row, ctx.now),
    messageId,
    pingBody(row, ctx.now),
    ctx.now,
  );
  const delivery = await webhooksRepo.insertPing(ctx.db, {
    webhookId: id,
    messageId,
    ok: outcome.ok,
    statusCode: outcome.statusCode,
    durationMs: outcome.durationMs,
    error: outcome.error,
    now: ctx.now,
  });
  return toDelivery(delivery);
}

export async function listDeliveries(
  ctx: ServiceContext,
  id: string,
  page: { cursor?: string; limit?: number },
): Promise<Schemas['WebhookDeliveryPage']> {
  const limit = page.limit ?? 50;
  const before = page.cursor === undefined ? null : Number(page.cursor);
  if (before !== null && !Number.isSafeInteger(before))
    throw badRequest('cursor is invalid; pass the nextCursor of the previous page');
  const rows = await webhooksRepo.deliveries(ctx.db, ownerOf(ctx), id, before, limit + 1);
  if (!rows) throw notFound('Webhook not found');
  const items = rows.slice(0, limit).map(toDelivery);
  return { items, nextCursor: rows.length > limit ? items[items.length - 1]!.id : null };
}

export async function retryDelivery(
  ctx: ServiceContext,
  id: string,
  deliveryId: string,
): Promise<Schemas['WebhookDelivery']> {
  const n = Number(deliveryId);
  const row = Number.isSafeInteger(n)
    ? await webhooksRepo.retry(ctx.db, { userId: ownerOf(ctx), webhookId: id, deliveryId: n, now: ctx.now })
    : undefined;
  if (!row) throw notFound('Webhook delivery not found');
  return toDelivery(row);
}
