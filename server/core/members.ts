/**
 * Member rows and their JSON shapes in the contract (full member, summary). Not in an area: the
 * members area writes these rows, and the areas below it (front, groups, systems) read and show
 * them in their own statements (docs/architecture.md, "Areas and their layers").
 */
import { createHash } from 'node:crypto';
import type { components } from '../../generated/api.d.ts';

/** Where a member's avatar or banner lives: an object in storage, or a legacy external URL. */
export type MediaRef =
  | { source: 'object'; key: string; contentType: string; etag: string }
  | { source: 'url'; url: string };

export interface MemberRow {
  id: string;
  user_id: string;
  side_system_id: string;
  sub_system_id: string | null;
  directory_id: string | null;
  name: string;
  display_name: string | null;
  pronouns: string | null;
  description: string | null;
  about_tags: string[];
  profile_style: Record<string, unknown> | null;
  avatar: MediaRef | null;
  banner: MediaRef | null;
  archived_at: number | null;
  version: number;
  created_at: number;
  updated_at: number;
  deleted_at: number | null;
}

export type Member = components['schemas']['Member'];
export type MediaKind = components['schemas']['MediaKind'];

export interface MemberSummary {
  id: string;
  name: string;
  displayName: string;
  archived: boolean;
  avatarUrl: string | null;
}

/** Changes whenever the image changes, so clients can cache media URLs forever. */
function mediaVersion(ref: MediaRef): string {
  return createHash('sha256')
    .update(ref.source === 'object' ? ref.etag : ref.url)
    .digest('hex')
    .slice(0, 12);
}

/** The media route's URL for this image; with `ownerUserId` (a friend's member) the friend branch of the route answers it. */
export function mediaUrl(memberId: string, kind: MediaKind, ref: MediaRef | null, ownerUserId?: string): string | null {
  if (!ref) return null;
  return `/api/v1/members/${memberId}/media?kind=${kind}&v=${mediaVersion(ref)}${ownerUserId ? `&ownerUserId=${ownerUserId}` : ''}`;
}

export function toMember(row: MemberRow): Member {
  return memberOf(row.id, row.user_id, row);
}

/** The member's columns without its id and account (user_id, deleted_at), as a statement that reads them next to another row's gives them. */
export type MemberColumns = Omit<MemberRow, 'id' | 'user_id' | 'deleted_at'>;

/** toMember of a row read as columns of another (the current front's sessions): no copy of the row first. */
export function memberOf(id: string, userId: string, row: MemberColumns): Member {
  return {
    _id: id,
    userId,
    sideSystemId: row.side_system_id,
    subSystemId: row.sub_system_id,
    directoryId: row.directory_id,
    name: row.name,
    displayName: row.display_name ?? '',
    pronouns: row.pronouns ?? '',
    description: row.description ?? '',
    avatarUrl: mediaUrl(id, 'avatar', row.avatar),
    backgroundUrl: mediaUrl(id, 'banner', row.banner),
    aboutTags: row.about_tags,
    profileStyle: row.profile_style,
    archivedAt: row.archived_at,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    version: row.version,
  };
}

export function toMemberSummary(
  row: Pick<MemberRow, 'id' | 'name' | 'display_name' | 'archived_at' | 'avatar'>,
): MemberSummary {
  return {
    id: row.id,
    name: row.name,
    displayName: row.display_name ?? '',
    archived: row.archived_at !== null,
    avatarUrl: mediaUrl(row.id, 'avatar', row.avatar),
  };
}
