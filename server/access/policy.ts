/**
 * The privacy rules as pure functions (no SQL, no database): permission maps and their merge, a
 * viewer's level on content from the buckets both hold, and who may write. predicates.ts states
 * the same rules in SQL; resolve.ts builds the Access these take. The model: docs/privacy.md.
 */
import {
  type Access,
  PERMISSION_GROUPS,
  type PermissionGroup,
  type PermissionLevel,
  type PermissionMap,
  type ResolvedAccess,
} from '../core/context.ts';
import { forbidden, notFound } from '../core/errors.ts';

/** Content kinds that carry privacy buckets (privacy_bucket_assignments.kind, less `friend`). */
export type ContentKind =
  | 'member'
  | 'group'
  | 'directory'
  | 'custom_field'
  | 'profile_section'
  | 'side_system'
  | 'sub_system'
  | 'member_status';
export const CONTENT_KINDS: readonly ContentKind[] = [
  'member',
  'group',
  'directory',
  'custom_field',
  'profile_section',
  'side_system',
  'sub_system',
  'member_status',
];
export const PROFILE_SECTIONS = ['avatar', 'displayName', 'pronouns', 'about', 'profileStyle'] as const;
export type ProfileSection = (typeof PROFILE_SECTIONS)[number];

/** A level that grants something. */
export type GrantedLevel = Exclude<PermissionLevel, 'none'>;

/** The group whose level decides whether a friend sees a member's profile section. */
export const SECTION_GROUP: Record<ProfileSection, PermissionGroup> = {
  avatar: 'member_avatar',
  displayName: 'member_profile',
  pronouns: 'member_profile',
  about: 'member_profile',
  profileStyle: 'member_profile',
};

const RANK: Record<PermissionLevel, number> = { none: 0, read: 1, read_write: 2 };

/** Every group at `none`. */
export function noAccess(): PermissionMap {
  return Object.fromEntries(PERMISSION_GROUPS.map((g) => [g, 'none'])) as PermissionMap;
}

/** Every group at `read_write` (the owner's own view). */
export function fullAccess(): PermissionMap {
  return Object.fromEntries(PERMISSION_GROUPS.map((g) => [g, 'read_write'])) as PermissionMap;
}

/** Reads a stored permission map; a missing or unknown value is `none` (fail closed). */
export function permissionMap(stored: unknown): PermissionMap {
  const map = noAccess();
  if (stored && typeof stored === 'object') {
    for (const group of PERMISSION_GROUPS) {
      const value = (stored as Record<string, unknown>)[group];
      if (value === 'read' || value === 'read_write') map[group] = value;
    }
  }
  return map;
}

/** The per-group maximum of several maps (spec: overlapping buckets merge by the maximum level). */
export function mergeMax(maps: Iterable<PermissionMap>): PermissionMap {
  const merged = noAccess();
  for (const map of maps) {
    for (const group of PERMISSION_GROUPS) {
      if (RANK[map[group]] > RANK[merged[group]]) merged[group] = map[group];
    }
  }
  return merged;
}

export function atLeast(level: PermissionLevel, wanted: GrantedLevel): boolean {
  return RANK[level] >= RANK[wanted];
}

/**
 * The viewer's level per group on content carrying `contentBucketIds`: the owner gets everything,
 * a friend the maximum over the buckets both hold (none when they share none).
 */
export function levelsOn(access: ResolvedAccess, contentBucketIds: Iterable<string>): PermissionMap {
  if (access.level === 'owner') return fullAccess();
  const held = new Set(contentBucketIds);
  const map = noAccess();
  for (const group of PERMISSION_GROUPS) {
    if (access.grants[group].write.some((id) => held.has(id))) map[group] = 'read_write';
    else if (access.grants[group].read.some((id) => held.has(id))) map[group] = 'read';
  }
  return map;
}

/**
 * The viewer's level per group from its buckets alone, whatever the content: the most any piece of
 * content could grant it. The profile card's tabs use it; content reads always use the
 * content's own buckets (levelsOn, the predicates).
 */
export function viewerCeiling(access: ResolvedAccess): PermissionMap {
  if (access.level === 'owner') return fullAccess();
  const map = noAccess();
  for (const group of PERMISSION_GROUPS) {
    const { read, write } = access.grants[group];
    map[group] = write.length > 0 ? 'read_write' : read.length > 0 ? 'read' : 'none';
  }
  return map;
}

/**
 * The rule every friend route follows: what the viewer may not see does not exist for it (404,
 * the same answer as for an unknown id), so a response never reveals hidden content.
 */
export function requireVisible<T>(value: T | null | undefined, what: string): T {
  if (value === null || value === undefined) throw notFound(`${what} not found`);
  return value;
}

/** Writes are the owner's alone unless a friend route checks a read_write grant itself. */
export function assertCanWrite(access: Access): void {
  if (access.level !== 'owner') throw forbidden("Only the owner may change this account's content");
}
