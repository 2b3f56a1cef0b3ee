/**
 * Every table of the schema and what the native export does with it (docs/portability.md, "The
 * native export"): the account's own data is exported (one JSON Lines part per table, rows as
 * stored) and imported again; data derived from it by triggers is recomputed on import; the
 * server's own bookkeeping stays behind. test/nativeExport.test.ts fails when a migration adds a
 * table or a column this catalogue does not classify.
 *
 * For each exported table: how its rows are found (`owner`), read in pages (`page`, its primary key
 * without the account), matched on import (`key`, the primary key an upsert conflicts on), and what
 * each uuid column holds, so an import knows which ids to give new values: `refs` name the
 * account's own rows (always remapped), `accounts` name other accounts (kept; a row naming an
 * account this server does not have is skipped), `deferred` are the `refs` that may point at a row
 * written later in the same import (a parent of the same table, a member from a sub system), set
 * once everything is written.
 */

/** A column of the keyset a table is read in. */
export interface PageColumn {
  column: string;
  type: 'uuid' | 'text';
}

export interface ExportedTable {
  name: string;
  /** The column naming the account: `id` for the account's own row. */
  owner: 'id' | 'user_id';
  /** Keyset order of the export's pages (the primary key without the account); empty: one row at most. */
  page: PageColumn[];
  /** The conflict target of the import's upsert (the primary key). */
  key: string[];
  /** Every column of the table but the derived ones (the import writes them all). */
  columns: string[];
  /** Columns the archive leaves out (never exported). */
  omit?: string[];
  /** Columns kept by triggers from other rows: neither exported nor written; recomputed as an import writes those rows. */
  derived?: string[];
  refs?: string[];
  deferred?: Record<string, string>;
  accounts?: string[];
  /** Rows read per page, and written per statement. */
  batch?: number;
  /** What the import does: write the rows; update the importing account's own row; or skip them all (reported). */
  import?: 'rows' | 'account' | 'skip';
  /** Text sealed with the message keys: exported in clear as `content` (messages) or `data` (link previews). */
  sealed?: 'content' | 'data';
}

const pk = (...columns: string[]) => columns;
const uuidPage = (...columns: string[]): PageColumn[] => columns.map((column) => ({ column, type: 'uuid' }));
const ID: PageColumn[] = uuidPage('id');

/** The exported tables, in the order an import writes them (a row's references before the row). */
export const EXPORTED_TABLES: readonly ExportedTable[] = [
  {
    name: 'accounts',
    owner: 'id',
    page: [],
    key: pk('id'),
    import: 'account',
    columns: [
      'id',
      'username',
      'display_name',
      'plan',
      'is_admin',
      'pronouns',
      'status',
      'timezone',
      'country',
      'about_markdown',
      'banner_url',
      'image_url',
      'donor_supporter_unlocked',
      'closed_beta_participant_at',
      'created_at',
      'updated_at',
      'trash_retention_days',
      'appear_in_suggestions',
    ],
  },
  {
    name: 'api_keys',
    owner: 'user_id',
    page: ID,
    key: pk('id'),
    import: 'skip',
    omit: ['key_hash', 'key_prefix'],
    columns: [
      'id',
      'user_id',
      'name',
      'key_prefix',
      'key_hash',
      'scopes',
      'created_at',
      'last_used_at',
      'revoked_at',
      'expires_at',
    ],
  },
  {
    name: 'custom_color_schemes',
    owner: 'user_id',
    page: ID,
    key: pk('id'),
    columns: ['id', 'user_id', 'name', 'colors', 'created_at', 'updated_at'],
  },
  {
    name: 'custom_fonts',
    owner: 'user_id',
    page: ID,
    key: pk('id'),
    columns: ['id', 'user_id', 'name', 'source_url', 'created_at', 'updated_at'],
  },
  {
    name: 'appearance_settings',
    owner: 'user_id',
    page: ID,
    key: pk('id'),
    refs: ['custom_color_scheme_id', 'custom_font_id'],
    columns: [
      'id',
      'user_id',
      'theme_mode',
      'dark_variant',
      'color_scheme',
      'custom_color_scheme_id',
      'font_family',
      'custom_font_id',
      'font_size',
      'font_scale',
      'font_size_px',
      'amoled_base',
      'reduce_motion',
      'member_banner_gradients_enabled',
      'created_at',
      'updated_at',
    ],
  },
  {
    name: 'side_systems',
    owner: 'user_id',
    page: ID,
    key: pk('id'),
    columns: [
      'id',
      'user_id',
      'name',
      'description',
      'icon',
      'tag_code',
      'tag_color',
      'created_at',
      'updated_at',
      'deleted_at',
    ],
  },
  {
    name: 'sub_systems',
    owner: 'user_id',
    page: ID,
    key: pk('id'),
    refs: ['side_system_id', 'linked_member_id', 'parent_sub_system_id'],
    deferred: { linked_member_id: 'members', parent_sub_system_id: 'sub_systems' },
    columns: [
      'id',
      'user_id',
      'side_system_id',
      'linked_member_id',
      'parent_sub_system_id',
      'name',
      'description',
      'icon',
      'tag_code',
      'tag_color',
      'created_at',
      'updated_at',
      'deleted_at',
    ],
  },
  {
    name: 'active_system_context',
    owner: 'user_id',
    page: [],
    key: pk('user_id'),
    refs: ['side_system_id', 'sub_system_id'],
    columns: ['user_id', 'side_system_id', 'sub_system_id', 'is_unified_view', 'updated_at'],
  },
  {
    name: 'privacy_buckets',
    owner: 'user_id',
    page: ID,
    key: pk('id'),
    columns: [
      'id',
      'user_id',
      'slug',
      'builtin',
      'name',
      'description',
      'icon',
      'icon_color_preset',
      'friend_permissions',
      'created_at',
      'updated_at',
    ],
  },
  {
    name: 'directories',
    owner: 'user_id',
    page: ID,
    key: pk('id'),
    refs: ['side_system_id', 'sub_system_id', 'parent_id'],
    deferred: { parent_id: 'directories' },
    columns: [
      'id',
      'user_id',
      'kind',
      'side_system_id',
      'sub_system_id',
      'parent_id',
      'name',
      'description',
      'color',
      'created_at',
      'updated_at',
      'deleted_at',
    ],
  },
  {
    name: 'directory_layouts',
    owner: 'user_id',
    page: ID,
    key: pk('id'),
    refs: ['directory_id'],
    columns: ['id', 'user_id', 'directory_id', 'name', 'item_ids', 'created_at', 'updated_at', 'deleted_at'],
  },
  {
    name: 'members',
    owner: 'user_id',
    page: ID,
    key: pk('id'),
    refs: ['side_system_id', 'sub_system_id', 'directory_id'],
    columns: [
      'id',
      'user_id',
      'side_system_id',
      'sub_system_id',
      'directory_id',
      'name',
      'display_name',
      'pronouns',
      'description',
      'about_tags',
      'profile_style',
      'avatar',
      'banner',
      'archived_at',
      'version',
      'created_at',
      'updated_at',
      'deleted_at',
    ],
    // The member's own buckets, kept by triggers from its assignments (migration 0038).
    derived: ['bucket_ids'],
  },
  {
    name: 'group_members',
    owner: 'user_id',
    page: uuidPage('group_id', 'member_id'),
    key: pk('group_id', 'member_id'),
    refs: ['group_id', 'member_id'],
    columns: ['group_id', 'member_id', 'user_id', 'added_at'],
  },
  {
    name: 'custom_field_definitions',
    owner: 'user_id',
    page: ID,
    key: pk('id'),
    columns: [
      'id',
      'user_id',
      'name',
      'type',
      'description',
      'options',
      'sort_order',
      'created_at',
      'updated_at',
      'deleted_at',
    ],
  },
  {
    name: 'custom_field_values',
    owner: 'user_id',
    page: uuidPage('member_id', 'field_id'),
    key: pk('member_id', 'field_id'),
    refs: ['member_id', 'field_id'],
    columns: ['member_id', 'field_id', 'user_id', 'value', 'updated_at'],
  },
  {
    name: 'member_status_definitions',
    owner: 'user_id',
    page: ID,
    key: pk('id'),
    columns: ['id', 'user_id', 'name', 'color', 'icon', 'created_at', 'updated_at'],
  },
  {
    name: 'member_status_assignments',
    owner: 'user_id',
    page: uuidPage('member_id', 'status_id'),
    key: pk('member_id', 'status_id'),
    refs: ['member_id', 'status_id'],
    columns: ['member_id', 'status_id', 'user_id', 'assigned_at'],
  },
  {
    name: 'entries',
    owner: 'user_id',
    page: ID,
    key: pk('id'),
    refs: ['side_system_id', 'sub_system_id', 'member_id'],
    batch: 100,
    columns: [
      'id',
      'user_id',
      'side_system_id',
      'sub_system_id',
      'title',
      'content',
      'member_id',
      'member_ids',
      'created_at',
      'updated_at',
      'deleted_at',
    ],
    // The member of the note's only link, kept by triggers from its links (migration 0039).
    derived: ['sole_member_id'],
  },
  {
    name: 'entry_members',
    owner: 'user_id',
    page: uuidPage('entry_id', 'member_id'),
    key: pk('entry_id', 'member_id'),
    refs: ['entry_id', 'member_id'],
    columns: ['entry_id', 'member_id', 'user_id', 'position'],
  },
  {
    name: 'note_images',
    owner: 'user_id',
    page: [{ column: 'sha256', type: 'text' }],
    key: pk('user_id', 'sha256'),
    columns: ['user_id', 'sha256', 'stored_at'],
  },
  {
    name: 'front_custom_tiers',
    owner: 'user_id',
    page: ID,
    key: pk('id'),
    columns: ['id', 'user_id', 'display_name', 'created_at', 'updated_at'],
  },
  {
    name: 'front_sessions',
    owner: 'user_id',
    page: ID,
    key: pk('id'),
    refs: ['member_id', 'side_system_id', 'sub_system_id', 'created_by'],
    columns: [
      'id',
      'user_id',
      'member_id',
      'side_system_id',
      'sub_system_id',
      'started_at',
      'ended_at',
      'note',
      'created_by',
      'position',
      'created_at',
      'updated_at',
      'deleted_at',
    ],
  },
  {
    name: 'front_tier_presence',
    owner: 'user_id',
    page: uuidPage('member_id'),
    key: pk('user_id', 'member_id'),
    refs: ['member_id'],
    columns: ['user_id', 'member_id', 'tier_key', 'note', 'created_at', 'updated_at'],
  },
  {
    name: 'privacy_bucket_assignments',
    owner: 'user_id',
    page: [
      { column: 'kind', type: 'text' },
      { column: 'content_id', type: 'uuid' },
      { column: 'section_key', type: 'text' },
      { column: 'bucket_id', type: 'uuid' },
    ],
    key: pk('kind', 'content_id', 'section_key', 'bucket_id'),
    // content_id names a row of the account, or another account for kind `friend` (apply.ts decides per row).
    refs: ['bucket_id'],
    columns: ['user_id', 'bucket_id', 'kind', 'content_id', 'section_key', 'created_at'],
  },
  {
    name: 'privacy_bucket_defaults',
    owner: 'user_id',
    page: [
      { column: 'kind', type: 'text' },
      { column: 'bucket_id', type: 'uuid' },
    ],
    key: pk('user_id', 'kind', 'bucket_id'),
    refs: ['bucket_id'],
    columns: ['user_id', 'kind', 'bucket_id'],
  },
  {
    name: 'friendships',
    owner: 'user_id',
    page: ID,
    key: pk('id'),
    accounts: ['friend_user_id'],
    columns: [
      'id',
      'user_id',
      'friend_user_id',
      'status',
      'direction',
      'block_reason',
      'created_at',
      'accepted_at',
      'updated_at',
    ],
  },
  {
    name: 'terminology_settings',
    owner: 'user_id',
    page: ID,
    key: pk('id'),
    columns: ['id', 'user_id', 'terms', 'actions', 'icons', 'created_at', 'updated_at'],
  },
  {
    name: 'terminology_overrides',
    owner: 'user_id',
    page: ID,
    key: pk('id'),
    refs: ['side_system_id', 'sub_system_id'],
    columns: [
      'id',
      'user_id',
      'side_system_id',
      'sub_system_id',
      'terms',
      'actions',
      'icons',
      'created_at',
      'updated_at',
    ],
  },
  {
    name: 'messaging_spaces',
    owner: 'user_id',
    page: ID,
    key: pk('id'),
    refs: ['side_system_id'],
    columns: [
      'id',
      'user_id',
      'name',
      'description',
      'side_system_id',
      'position',
      'created_at',
      'updated_at',
      'archived_at',
      'icon_key',
    ],
  },
  {
    name: 'messaging_categories',
    owner: 'user_id',
    page: ID,
    key: pk('id'),
    refs: ['space_id'],
    columns: ['id', 'user_id', 'space_id', 'name', 'collapsed', 'position', 'created_at', 'updated_at'],
  },
  {
    name: 'messaging_channels',
    owner: 'user_id',
    page: ID,
    key: pk('id'),
    refs: ['space_id', 'category_id'],
    columns: [
      'id',
      'user_id',
      'space_id',
      'category_id',
      'name',
      'topic',
      'channel_type',
      'position',
      'last_seq',
      'read_seq',
      'unread_count',
      'created_at',
      'updated_at',
      'archived_at',
    ],
  },
  {
    name: 'messaging_messages',
    owner: 'user_id',
    page: ID,
    key: pk('id'),
    refs: ['channel_id', 'author_member_id', 'reply_to_id', 'mention_member_ids'],
    deferred: { reply_to_id: 'messaging_messages' },
    sealed: 'content',
    omit: ['key_id', 'content_enc'],
    columns: [
      'id',
      'user_id',
      'channel_id',
      'seq',
      'author_member_id',
      'key_id',
      'content_enc',
      'reply_to_id',
      'mention_member_ids',
      'client_mutation_id',
      'created_at',
      'edited_at',
      'deleted_at',
      'gif',
    ],
  },
  {
    name: 'messaging_attachments',
    owner: 'user_id',
    page: ID,
    key: pk('id'),
    refs: ['message_id'],
    columns: [
      'id',
      'user_id',
      'message_id',
      'position',
      'object_key',
      'file_name',
      'content_type',
      'byte_size',
      'width',
      'height',
      'duration_ms',
      'created_at',
    ],
  },
  {
    name: 'messaging_link_previews',
    owner: 'user_id',
    page: ID,
    key: pk('id'),
    refs: ['message_id'],
    sealed: 'data',
    omit: ['key_id', 'data_enc'],
    columns: [
      'id',
      'user_id',
      'message_id',
      'position',
      'key_id',
      'data_enc',
      'status',
      'failure',
      'image_key',
      'fetched_at',
      'dismissed_at',
      'created_at',
      'updated_at',
    ],
  },
  {
    name: 'messaging_pins',
    owner: 'user_id',
    page: uuidPage('channel_id', 'message_id'),
    key: pk('channel_id', 'message_id'),
    refs: ['channel_id', 'message_id'],
    columns: ['user_id', 'channel_id', 'message_id', 'pinned_at'],
  },
  {
    name: 'messaging_preferences',
    owner: 'user_id',
    page: [],
    key: pk('user_id'),
    refs: ['last_space_id', 'last_channel_id'],
    columns: ['user_id', 'last_space_id', 'last_channel_id', 'emoji', 'gif', 'updated_at'],
  },
  {
    name: 'messaging_chat_as',
    owner: 'user_id',
    page: [
      { column: 'space_id', type: 'uuid' },
      { column: 'channel_key', type: 'text' },
    ],
    key: pk('user_id', 'space_id', 'channel_key'),
    refs: ['space_id', 'member_id'],
    columns: ['user_id', 'space_id', 'channel_key', 'member_id', 'updated_at'],
  },
  {
    name: 'social_profiles',
    owner: 'user_id',
    page: [],
    key: pk('user_id'),
    columns: ['user_id', 'theme', 'updated_at'],
  },
  {
    name: 'social_links',
    owner: 'user_id',
    page: ID,
    key: pk('id'),
    columns: [
      'id',
      'user_id',
      'platform',
      'display_name',
      'handle',
      'url',
      'description',
      'badge',
      'accent_color',
      'avatar_url',
      'visibility',
      'featured',
      'sort_order',
      'created_at',
      'updated_at',
    ],
  },
  {
    name: 'social_widgets',
    owner: 'user_id',
    page: ID,
    key: pk('id'),
    batch: 100,
    columns: [
      'id',
      'user_id',
      'type',
      'title',
      'config',
      'visibility',
      'size',
      'sort_order',
      'pinned',
      'collapsed',
      'created_at',
      'updated_at',
    ],
  },
  {
    name: 'guestbook_messages',
    owner: 'user_id',
    page: ID,
    key: pk('id'),
    refs: ['widget_id', 'parent_message_id'],
    deferred: { parent_message_id: 'guestbook_messages' },
    accounts: ['author_user_id'],
    columns: [
      'id',
      'user_id',
      'widget_id',
      'parent_message_id',
      'author_user_id',
      'posted_anonymously',
      'body',
      'hidden_by_owner',
      'created_at',
    ],
  },
  {
    name: 'poll_ballots',
    owner: 'user_id',
    page: uuidPage('widget_id', 'voter_user_id'),
    key: pk('widget_id', 'voter_user_id'),
    refs: ['widget_id'],
    accounts: ['voter_user_id'],
    columns: ['widget_id', 'voter_user_id', 'user_id', 'option_indices', 'updated_at'],
  },
  {
    name: 'social_gallery_images',
    owner: 'user_id',
    page: [{ column: 'sha256', type: 'text' }],
    key: pk('user_id', 'sha256'),
    columns: ['user_id', 'sha256', 'content_type', 'byte_size', 'created_at'],
  },
  {
    name: 'social_identities',
    owner: 'user_id',
    page: ID,
    key: pk('id'),
    import: 'skip',
    columns: ['id', 'user_id', 'provider', 'external_user_id', 'handle', 'url', 'avatar_url', 'verified_at'],
  },
];

/** Tables kept by triggers from the exported ones: not exported, recomputed as an import writes. */
export const DERIVED_TABLES = [
  'front_session_counts',
  'front_session_buckets',
  'entry_link_buckets',
  'member_note_counts',
  'friend_grants',
] as const;

/** The server's own bookkeeping: never exported. */
export const INTERNAL_TABLES = [
  'app_meta',
  'rate_limit_windows',
  'jobs',
  'job_schedules',
  'staged_uploads',
  'audit_events',
  'imports',
  'import_refs',
  'exports',
  // The event log: changes of the last EVENT_RETENTION_HOURS, for streams to resume from; an import writes its own.
  'events',
  'events_pruned',
  // Webhooks: this server's delivery settings, sealed with its keyring and signed with secrets that
  // must never leave it; re-created on the other side (docs/webhooks.md). Their deliveries are a log.
  'webhooks',
  'webhook_deliveries',
  // Each account's number of webhooks, kept by triggers (the cap's row, migration 0033).
  'webhook_counts',
  // Responses stored under Idempotency-Keys for a day: a retry's answer on this server, not data.
  'idempotency_keys',
  'schema_migrations',
  'schema_migrations_lock',
] as const;

/** The columns the archive carries for a table: its columns without the omitted ones, plus the sealed text in clear. */
export function archiveColumns(table: ExportedTable): string[] {
  const kept = table.columns.filter((c) => !table.omit?.includes(c));
  return table.sealed ? [...kept, table.sealed] : kept;
}

/** The folders of an account's stored objects (`u/<account>/<folder>…`) that rows reference: an archive's media. */
export const MEDIA_FOLDERS = [
  'members/',
  'entry-images/',
  'social-gallery/',
  'messaging/attachments/',
  'messaging/space-icons/',
  'messaging/link-previews/',
] as const;

/** Objects named by a row's key rather than stored in it: re-hosted note images and gallery images. */
export const DERIVED_MEDIA: Readonly<Record<string, (userId: string, row: { sha256: string }) => string>> = {
  note_images: (userId, row) => `u/${userId}/entry-images/${row.sha256}`,
  social_gallery_images: (userId, row) => `u/${userId}/social-gallery/${row.sha256}`,
};
