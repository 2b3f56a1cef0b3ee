/**
 * Built-in privacy buckets (docs/privacy.md, "Presets") and the defaults applied to new content.
 *
 * Presets are created on an account's first need of them (the bucket list, a friendship being
 * accepted) by `ensurePresets`, an `insert … on conflict do nothing` on the unique (account, slug)
 * index, so concurrent first reads cannot duplicate them. The first time they are created, the
 * `new_friend` default is set to `public_friends`; content defaults start empty, so new content is
 * seen by no friend until the owner shares it or sets a default for its kind.
 */
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { PermissionMap } from '../../core/context.ts';
import { presetsRepo } from './repo.ts';
import type { Sql } from '../../db/sql.ts';

export interface Preset {
  slug: string;
  name: string;
  description: string;
  icon: string;
  iconColorPreset: string;
  friendPermissions: PermissionMap;
}

export const PRESETS: readonly Preset[] = [
  {
    slug: 'public_friends',
    name: 'Friends',
    description: 'Every accepted friend: who is in the system, their public profile, groups and who is fronting.',
    icon: 'users',
    iconColorPreset: 'blue',
    friendPermissions: {
      members_view: 'read',
      member_profile: 'read',
      member_avatar: 'read',
      member_notes: 'none',
      member_custom_fields: 'none',
      member_statuses: 'read',
      member_relationships: 'none',
      groups: 'read',
      front: 'read',
      friend_data: 'read',
    },
  },
  {
    slug: 'trusted_friend',
    name: 'Trusted friends',
    description: 'Close friends: everything shared, and they may update the front, notes and custom field values.',
    icon: 'heart',
    iconColorPreset: 'pink',
    friendPermissions: {
      members_view: 'read',
      member_profile: 'read',
      member_avatar: 'read',
      member_notes: 'read_write',
      member_custom_fields: 'read_write',
      member_statuses: 'read',
      member_relationships: 'read',
      groups: 'read',
      front: 'read_write',
      friend_data: 'read',
    },
  },
];

/** The kinds of defaults (spec: GET/PUT /privacy-buckets/defaults/{kind}). */
export const DEFAULT_KINDS = [
  'new_member',
  'new_group',
  'new_directory',
  'new_custom_field',
  'new_profile_section',
  'new_friend',
] as const;
export type DefaultKind = (typeof DEFAULT_KINDS)[number];

/** Creates the account's missing presets (never duplicates them, however many run at once). */
export async function ensurePresets(db: Knex, userId: string, now: number): Promise<void> {
  const rows = PRESETS.map((p, i) => ({
    id: randomUUID(),
    slug: p.slug,
    name: p.name,
    description: p.description,
    icon: p.icon,
    icon_color_preset: p.iconColorPreset,
    friend_permissions: p.friendPermissions,
    // Presets list first (oldest first), in this order, even when created in the same millisecond.
    created_at: now - PRESETS.length + i,
  }));
  const inserted = await presetsRepo.insertMissing(db, userId, rows, now);
  const friends = inserted.find((r) => r.slug === 'public_friends');
  if (friends) await presetsRepo.addDefault(db, userId, 'new_friend', friends.id);
}

/** Which content kind each default applies to (privacy_bucket_assignments.kind). */
const KIND_OF_DEFAULT: Record<DefaultKind, string> = {
  new_member: 'member',
  new_group: 'group',
  new_directory: 'directory',
  new_custom_field: 'custom_field',
  new_profile_section: 'profile_section',
  new_friend: 'friend',
};

const SECTIONS = ['avatar', 'displayName', 'pronouns', 'about', 'profileStyle'];

/**
 * Gives new content of `kind` the owner's default buckets for it, in one statement whatever the
 * number of ids (`new_profile_section` gives each of the member ids' five sections). Run in the
 * transaction that creates the content. For `new_friend` the ids are the friends' account ids.
 */
/**
 * applyDefaults as SQL to embed as a CTE of the statement that creates the content, inserting only
 * `when` (the condition under which that statement wrote it).
 */
export function defaultsSql(
  userId: string,
  kind: DefaultKind,
  contentIds: readonly string[],
  now: number,
  when: Sql,
): Sql {
  const sections = kind === 'new_profile_section' ? SECTIONS : [''];
  return presetsRepo.defaultsSql({
    userId,
    defaultKind: kind,
    contentKind: KIND_OF_DEFAULT[kind],
    contentIds,
    sections,
    now,
    when,
  });
}

export async function applyDefaults(
  db: Knex,
  userId: string,
  kind: DefaultKind,
  contentIds: readonly string[],
  now: number,
): Promise<void> {
  if (contentIds.length === 0) return;
  const sections = kind === 'new_profile_section' ? SECTIONS : [''];
  await presetsRepo.applyDefaults(db, userId, kind, KIND_OF_DEFAULT[kind], contentIds, sections, now);
}
