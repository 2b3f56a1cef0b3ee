/**
 * Guestbook messages (docs/social.md): threads of top-level messages with one level of replies,
 * posted by the owner or by friends who can see the widget, deleted for good by the guestbook's
 * owner or the author, hidden by the owner, and authors blocked through the friends block list.
 */
import { randomUUID } from 'node:crypto';
import type { components } from '../../../generated/api.d.ts';
import { forFriend, onBehalfOf } from '../../access/index.ts';
import {
  inTransaction,
  oneStatement,
  ownerOf,
  type PresetId,
  readsAnswerAhead,
  type ServiceContext,
  StaleAnswer,
} from '../../core/context.ts';
import { badRequest, forbidden, notFound } from '../../core/errors.ts';
import { block } from '../friends/index.ts';
import { guestbookRepo, type MessageRow } from './repo/guestbook.ts';
import { visibleToFriend } from './visibility.ts';
import { actorOf, requireWidget } from './widgets.ts';

type Schemas = components['schemas'];

const GUESTBOOK_NOT_FOUND = 'Guestbook not found';
const MESSAGE_NOT_FOUND = 'Guestbook message not found';
const BODY_MAX = 500;
const ANONYMOUS_REFUSED = 'This guestbook does not allow anonymous posts';
const PARENT_REFUSED = 'parentMessageId must be a top-level message of this guestbook';

function toMessage(r: MessageRow): Schemas['GuestbookMessage'] {
  return {
    id: r.id,
    ownerUserId: r.user_id,
    parentMessageId: r.parent_message_id,
    authorUserId: r.author_user_id,
    authorDisplayName: r.display_name,
    postedAnonymously: r.posted_anonymously,
    body: r.body,
    createdAt: Number(r.created_at),
    hiddenByOwner: r.hidden_by_owner,
    displayName: r.posted_anonymously ? 'Anonymous' : r.display_name,
    authorAvatarUrl: r.image_url,
    authorStatus: {
      isAdmin: r.is_admin,
      planKey: r.plan,
      donorSupporterUnlocked: r.donor_supporter_unlocked,
      closedBetaParticipantAt: r.closed_beta_participant_at === null ? null : Number(r.closed_beta_participant_at),
    },
  };
}

/**
 * A page of threads, newest first. The cursor is a createdAt: the page holds threads created
 * strictly before it, and never ends inside a run of equal createdAt (the run is completed on this
 * page), so no thread is dropped or repeated. At most five statements, whatever the page size.
 */
export async function listThreads(
  ctx: ServiceContext,
  widgetId: string,
  limit: number,
  cursor: number | undefined,
): Promise<Schemas['GuestbookPage']> {
  const { db } = ctx;
  await requireWidget(ctx, widgetId, 'guestbook', GUESTBOOK_NOT_FOUND);
  const rows = await guestbookRepo.threads(db, widgetId, limit + 1, cursor);
  let page = rows.slice(0, limit);
  let more = rows.length > limit;
  if (more) {
    const last = page[page.length - 1]!;
    if (Number(rows[limit]!.created_at) === Number(last.created_at)) {
      const ties = await guestbookRepo.threadTies(db, widgetId, last.created_at, last.id);
      page = page.concat(ties);
      more = await guestbookRepo.threadBefore(db, widgetId, last.created_at);
    }
  }
  const ids = page.map((r) => r.id);
  const replies: MessageRow[] = ids.length ? await guestbookRepo.replies(db, ids) : [];
  const byParent = new Map<string, Schemas['GuestbookMessage'][]>();
  for (const r of replies) {
    const list = byParent.get(r.parent_message_id!) ?? [];
    list.push(toMessage(r));
    byParent.set(r.parent_message_id!, list);
  }
  return {
    threads: page.map((r) => ({ ...toMessage(r), replies: byParent.get(r.id) ?? [] })),
    nextCursor: more ? Number(page[page.length - 1]!.created_at) : null,
  };
}

/** Posts as the acting account (the owner on owner routes, the viewer on friend routes). */
export async function post(
  ctx: ServiceContext,
  widgetId: string,
  input: Schemas['PostGuestbookMessageRequest'] & PresetId,
  notFoundMessage = GUESTBOOK_NOT_FOUND,
): Promise<Schemas['GuestbookMessage']> {
  const { now } = ctx;
  const body = input.body.trim();
  const bodyOk = body.length >= 1 && body.length <= BODY_MAX;
  const anonymous = input.postAnonymously ?? false;
  const id = input.id ?? randomUUID();
  const fields = {
    id,
    user_id: ownerOf(ctx),
    widget_id: widgetId,
    parent_message_id: input.parentMessageId ?? null,
    author_user_id: actorOf(ctx),
    posted_anonymously: anonymous,
    body,
    hidden_by_owner: false,
    created_at: now,
  };
  // On the guestbook owner's log; an anonymous post does not name the friend who wrote it.
  const posted = { type: 'guestbook.posted', area: 'guestbook', data: { id, widgetId }, anonymous } as const;
  // The owner's post: one statement (guestbookRepo.post), the widget's and the parent's checks in it,
  // refused in the order of the checks below. A friend's (visibility first) and a bad body take the path below.
  // A keyed post (its key taken by its write) reads its author's card first (its answer shows it), and the post
  // writes only if the card is still so: else nothing is written and it runs again in a transaction.
  if (ctx.access.level === 'owner' && bodyOk) {
    const card = readsAnswerAhead(ctx) ? await guestbookRepo.authorCard(ctx.db, fields.author_user_id) : undefined;
    const answer = card && toMessage({ ...fields, ...card });
    const events = ctx.events.rows(ctx, [posted]);
    const verdict = await oneStatement(
      ctx,
      (db) => guestbookRepo.post(db, fields, events, card?.digest ?? null),
      answer && { body: answer },
    );
    if (verdict.message) return answer ?? toMessage(verdict.message);
    if (!verdict.found) throw notFound(notFoundMessage);
    if (anonymous && !verdict.allow_anonymous) throw badRequest(ANONYMOUS_REFUSED);
    if (verdict.ahead_ok === false && verdict.notified === null) throw new StaleAnswer();
    throw badRequest(PARENT_REFUSED);
  }
  const widget = await requireWidget(ctx, widgetId, 'guestbook', notFoundMessage);
  if (!bodyOk) throw badRequest(`body must be 1 to ${BODY_MAX} characters after trimming`);
  if (anonymous && (widget.config as { allowAnonymous?: boolean }).allowAnonymous !== true)
    throw badRequest(ANONYMOUS_REFUSED);
  // The parent is checked and locked in the reply's transaction: deleted meanwhile, it is a 400, not a failed insert.
  const row = await inTransaction(ctx, async (tx) => {
    const trx = tx.db;
    if (input.parentMessageId !== undefined && !(await guestbookRepo.isTopLevel(trx, widgetId, input.parentMessageId)))
      throw badRequest(PARENT_REFUSED);
    await guestbookRepo.insert(trx, fields);
    await tx.events.emit(tx, posted);
    return guestbookRepo.message(trx, id);
  });
  return toMessage(row!);
}

/** Deletes by messageId on any guestbook: the owner of its guestbook or its author only. Replies go with a top-level message. */
export async function remove(ctx: ServiceContext, widgetId: string, messageId: string): Promise<void> {
  const me = ownerOf(ctx);
  await requireWidget(ctx, widgetId, 'guestbook', GUESTBOOK_NOT_FOUND);
  const found = await guestbookRepo.findAnywhere(ctx.db, messageId);
  if (!found) throw notFound(MESSAGE_NOT_FOUND);
  if (found.user_id !== me && found.author_user_id !== me)
    throw forbidden('Only the guestbook owner or the author can delete this message');
  await inTransaction(ctx, async (tx) => {
    await guestbookRepo.delete(tx.db, messageId);
    // On the guestbook owner's log, whoever deletes (its author may be a friend); an anonymous
    // message's author is not named.
    const onGuestbook = found.user_id === me ? tx : { ...tx, access: onBehalfOf(found.user_id) };
    await tx.events.emit(onGuestbook, {
      type: 'guestbook.deleted',
      area: 'guestbook',
      data: { id: messageId, widgetId: found.widget_id },
      anonymous: found.posted_anonymously,
    });
  });
}

export async function setHidden(
  ctx: ServiceContext,
  widgetId: string,
  messageId: string,
  hidden: boolean,
): Promise<void> {
  await requireWidget(ctx, widgetId, 'guestbook', GUESTBOOK_NOT_FOUND);
  await inTransaction(ctx, async (tx) => {
    if (!(await guestbookRepo.setHidden(tx.db, ownerOf(tx), widgetId, messageId, hidden)))
      throw notFound(MESSAGE_NOT_FOUND);
    await tx.events.emit(tx, {
      type: 'guestbook.updated',
      area: 'guestbook',
      data: { id: messageId, widgetId, fields: ['hiddenByOwner'] },
    });
  });
}

/**
 * Blocks the author of a message through the friends block list. The guestbook's owner may block
 * any of its authors; another caller only a non-anonymous author of a message it can see.
 */
export async function blockAuthor(
  ctx: ServiceContext,
  widgetId: string,
  input: Schemas['BlockGuestbookAuthorRequest'],
): Promise<void> {
  const me = ownerOf(ctx);
  await requireWidget(ctx, widgetId, 'guestbook', GUESTBOOK_NOT_FOUND);
  const found = await guestbookRepo.findAnywhere(ctx.db, input.messageId);
  if (!found) throw notFound(MESSAGE_NOT_FOUND);
  if (found.user_id !== me && found.author_user_id !== me) {
    // Another account's guestbook: the caller must be able to see it, as on the friend routes.
    const access = await forFriend(ctx.db, me, found.user_id);
    if (!access || !(await visibleToFriend(ctx.db, found.user_id, me, found.visibility)))
      throw notFound(MESSAGE_NOT_FOUND);
  }
  if (found.author_user_id === me) throw badRequest('You cannot block yourself');
  if (found.posted_anonymously && found.user_id !== me)
    throw forbidden('Only the guestbook owner can block an anonymous author');
  await block(ctx, found.author_user_id, input.reason);
}
