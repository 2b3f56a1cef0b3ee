/** Member rows → the JSON shapes of the contract (full member, summary). */
import { createHash } from 'node:crypto';
import type { components } from '../../../generated/api.d.ts';
import type { MediaRef, MemberRow } from './repo.ts';

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
  return {
    _id: row.id,
    userId: row.user_id,
    sideSystemId: row.side_system_id,
    subSystemId: row.sub_system_id,
    directoryId: row.directory_id,
    name: row.name,
    displayName: row.display_name ?? '',
    pronouns: row.pronouns ?? '',
    description: row.description ?? '',
    avatarUrl: mediaUrl(row.id, 'avatar', row.avatar),
    backgroundUrl: mediaUrl(row.id, 'banner', row.banner),
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
