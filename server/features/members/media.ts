/**
 * Member avatars and banners: uploads go to object storage (type sniffed from the bytes);
 * legacy external URLs are kept as links and answered with a redirect when they can be embedded.
 */
import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import type { Logger } from 'pino';
import { type FriendContext, inTransaction, ownerOf, type ServiceContext } from '../../core/context.ts';
import { badRequest, notFound, unsupportedMediaType, unavailable } from '../../core/errors.ts';
import { sniffImageType } from '../../storage/images.ts';
import { readStoredImage, type StoredImageResponse } from '../../storage/serve.ts';
import type { ObjectStorage } from '../../storage/types.ts';
import { toMember, type MediaKind, type MediaRef, type Member, type MemberRow } from '../../core/members.ts';
import { membersRepo } from './repo.ts';
import { changeMember, memberChanged } from './service.ts';

const COLUMN: Record<MediaKind, 'avatar' | 'banner'> = { avatar: 'avatar', banner: 'banner' };
/** The member read shape's field each kind shows in. */
const FIELD: Record<MediaKind, 'avatarUrl' | 'backgroundUrl'> = { avatar: 'avatarUrl', banner: 'backgroundUrl' };

export type MediaResponse = StoredImageResponse | { status: 302; headers: Record<string, string> } | { status: 503 };

/** An https URL on a public host name: safe to hand to a browser as an image source. */
export function isEmbeddableUrl(url: string): boolean {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return false;
  }
  if (parsed.protocol !== 'https:' || parsed.username || parsed.password) return false;
  const host = parsed.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  return isIP(host) === 0 && host !== 'localhost' && !host.endsWith('.localhost') && host.includes('.');
}

export async function readMemberMedia(
  ctx: ServiceContext,
  memberId: string,
  kind: MediaKind,
  ifNoneMatch: string | undefined,
): Promise<MediaResponse> {
  const member = await membersRepo.findLive(ctx.db, ownerOf(ctx), memberId);
  return answerMedia(ctx, member?.[COLUMN[kind]] ?? null, ifNoneMatch);
}

/**
 * A friend's view of a member's avatar or banner (both are the `avatar` profile section): the member
 * live, not archived and visible to the friend (visibleMembers), its buckets granting member_avatar
 * at read and the avatar section not narrowing it away; anything else is the empty 404 of an
 * unknown member. One statement.
 */
export async function readFriendMemberMedia(
  fctx: FriendContext,
  memberId: string,
  kind: MediaKind,
  ifNoneMatch: string | undefined,
): Promise<MediaResponse> {
  const row = await membersRepo.friendMedia(fctx.db, fctx.access, memberId);
  return answerMedia(fctx, row?.[COLUMN[kind]] ?? null, ifNoneMatch);
}

async function answerMedia(
  ctx: ServiceContext,
  ref: MediaRef | null,
  ifNoneMatch: string | undefined,
): Promise<MediaResponse> {
  const { storage } = ctx;
  if (!ref) return { status: 404 };
  if (ref.source === 'url') {
    return isEmbeddableUrl(ref.url) ? { status: 302, headers: { Location: ref.url } } : { status: 404 };
  }
  if (!storage) return { status: 503 };
  return readStoredImage(storage, ref.key, ifNoneMatch);
}

function requireStorage(storage: ObjectStorage | null): ObjectStorage {
  if (!storage) throw unavailable('Object storage is not configured on this server');
  return storage;
}

export async function uploadMemberMedia(
  ctx: ServiceContext,
  memberId: string,
  kind: MediaKind,
  body: Buffer | undefined,
): Promise<Member> {
  const { db, storage, log, now } = ctx;
  const userId = ownerOf(ctx);
  const store = requireStorage(storage);
  if (!(await membersRepo.findLive(db, userId, memberId))) throw notFound('Member not found');
  if (!body || body.length === 0) throw badRequest('Request body must be the image bytes');
  const contentType = sniffImageType(body);
  if (!contentType) throw unsupportedMediaType('Body is not a PNG, JPEG, WebP or GIF image');
  const digest = createHash('sha256').update(body).digest('hex');
  const key = `u/${userId}/members/${memberId}/${kind}/${digest}`;
  const { etag } = await store.put(key, body, contentType);
  const ref: MediaRef = { source: 'object', key, contentType, etag };
  let previous: MediaRef | null = null;
  const row = await inTransaction(ctx, async (tx) => {
    const changed = await changeMember(tx.db, userId, memberId, now, async (current: MemberRow) => {
      previous = current[COLUMN[kind]];
      return { [COLUMN[kind]]: ref };
    });
    await memberChanged(tx, memberId, [FIELD[kind]]);
    return changed;
  });
  await dropObject(store, previous, key, log);
  return toMember(row);
}

export async function deleteMemberMedia(ctx: ServiceContext, memberId: string, kind: MediaKind): Promise<void> {
  const { db, storage, log, now } = ctx;
  const userId = ownerOf(ctx);
  const member = await membersRepo.findLive(db, userId, memberId);
  if (!member) throw notFound('Member not found');
  const previous = member[COLUMN[kind]];
  if (!previous) return;
  await inTransaction(ctx, async (tx) => {
    await changeMember(tx.db, userId, memberId, now, async () => ({ [COLUMN[kind]]: null }));
    await memberChanged(tx, memberId, [FIELD[kind]]);
  });
  if (storage) await dropObject(storage, previous, undefined, log);
}

/** Best effort: an orphaned object wastes space but loses nothing, so failures are only logged. */
async function dropObject(
  storage: ObjectStorage,
  ref: MediaRef | null,
  keep: string | undefined,
  log: Logger,
): Promise<void> {
  if (!ref || ref.source !== 'object' || ref.key === keep) return;
  try {
    await storage.delete(ref.key);
  } catch (err) {
    log.warn({ err, key: ref.key }, 'could not delete replaced media object');
  }
}
