/** Finding the widget a guestbook or poll route names, as the owner or as a friend viewer. */
import type { ServiceContext } from '../../core/context.ts';
import { ownerOf } from '../../core/context.ts';
import { notFound } from '../../core/errors.ts';
import { type WidgetRow, widgetsRepo } from './repo/widgets.ts';
import { visibleToFriend } from './visibility.ts';

export type WidgetKind = 'guestbook' | 'poll';

/** The account acting: the owner itself, or the friend viewer. */
export function actorOf(ctx: ServiceContext): string {
  return ctx.access.level === 'friend' ? ctx.access.viewerId! : ownerOf(ctx);
}

/**
 * The owner's widget of this kind: for the owner any of its own; for a friend only one whose
 * visibility lets the viewer see it. Otherwise 404 with `message` (the same body for every case).
 */
export async function requireWidget(
  ctx: ServiceContext,
  widgetId: string,
  kind: WidgetKind,
  message: string,
  lock?: 'share',
): Promise<WidgetRow> {
  const ownerId = ownerOf(ctx);
  const row = await widgetsRepo.find(ctx.db, ownerId, widgetId, { kind, lock });
  if (!row) throw notFound(message);
  if (ctx.access.level === 'friend' && !(await visibleToFriend(ctx.db, ownerId, actorOf(ctx), row.visibility)))
    throw notFound(message);
  return row;
}
