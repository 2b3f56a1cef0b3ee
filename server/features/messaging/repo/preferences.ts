/**
 * The SQL of messaging preferences: the account's row (last viewed route, emoji and GIF settings)
 * and its "chat as" choices per space and channel. Committed as generated/sql/messaging.sql.
 */
import type { Knex } from 'knex';
import { sql } from '../../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../../db/statements.ts';

const AREA = 'messaging';

/** What one write of the preferences row sets: the route, or the emoji settings, or the GIF settings (JSON text). */
export type PreferenceChanges =
  | { kind: 'route'; lastSpaceId: string | null; lastChannelId: string | null }
  | { kind: 'emoji'; json: string }
  | { kind: 'gif'; json: string };

/**
 * Creates the row or changes it: the columns of `changes` are set, the others kept (null in a new
 * row). One text whatever the write sets.
 */
const upsert = statement<{ userId: string; now: number; changes: PreferenceChanges }, never>({
  name: 'messaging_preferences_upsert',
  area: AREA,
  variants: { 'the columns given': { userId: EXAMPLE_UUID, now: 0, changes: { kind: 'emoji', json: '{}' } } },
  build: ({ userId, now, changes: c }) => {
    const route = c.kind === 'route';
    return sql`insert into messaging_preferences as p (user_id, last_space_id, last_channel_id, emoji, gif, updated_at)
      values (${userId}, ${route ? c.lastSpaceId : null}::uuid, ${route ? c.lastChannelId : null}::uuid,
        ${c.kind === 'emoji' ? c.json : null}::jsonb, ${c.kind === 'gif' ? c.json : null}::jsonb, ${now})
      on conflict (user_id) do update set
        last_space_id = case when ${route}::boolean then excluded.last_space_id else p.last_space_id end,
        last_channel_id = case when ${route}::boolean then excluded.last_channel_id else p.last_channel_id end,
        emoji = coalesce(excluded.emoji, p.emoji),
        gif = coalesce(excluded.gif, p.gif),
        updated_at = excluded.updated_at`;
  },
});

const settings = statement<{ userId: string }, { emoji: unknown; gif: unknown }>({
  name: 'messaging_preferences_settings',
  area: AREA,
  variants: { 'the account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) => sql`select emoji, gif from messaging_preferences where user_id = ${userId} limit 1`,
});

export interface LastViewedRow {
  space_id: string | null;
  channel_space_id: string | null;
  channel_id: string | null;
}

/** The stored route, each part only while live (a channel: in a live space). */
const lastViewed = statement<{ userId: string }, LastViewedRow>({
  name: 'messaging_last_viewed',
  area: AREA,
  variants: { 'the account': { userId: EXAMPLE_UUID } },
  build: ({ userId }) => sql`select s.id as space_id, cs.id as channel_space_id, c.id as channel_id
    from messaging_preferences p
    left join messaging_spaces s on s.id = p.last_space_id and s.user_id = p.user_id and s.archived_at is null
    left join messaging_channels c on c.id = p.last_channel_id and c.user_id = p.user_id and c.archived_at is null
    left join messaging_spaces cs on cs.id = c.space_id and cs.archived_at is null
    where p.user_id = ${userId}
    limit 1`,
});

const channelOfSpace = statement<{ userId: string; spaceId: string; channelId: string }, { id: string }>({
  name: 'messaging_channel_of_space',
  area: AREA,
  variants: { 'a channel': { userId: EXAMPLE_UUID, spaceId: EXAMPLE_UUID, channelId: EXAMPLE_UUID } },
  build: ({ userId, spaceId, channelId }) => sql`select id from messaging_channels
    where id = ${channelId} and user_id = ${userId} and space_id = ${spaceId} and archived_at is null
    limit 1`,
});

/** The choices stored under `keys` whose member is still live and not archived. */
const chatAs = statement<
  { userId: string; spaceId: string; keys: readonly string[] },
  { channel_key: string; member_id: string }
>({
  name: 'messaging_chat_as',
  area: AREA,
  variants: { 'a space': { userId: EXAMPLE_UUID, spaceId: EXAMPLE_UUID, keys: [] } },
  build: ({ userId, spaceId, keys }) => sql`select a.channel_key, a.member_id
    from messaging_chat_as a join members m on m.id = a.member_id
    where a.user_id = ${userId} and a.space_id = ${spaceId} and a.channel_key = any (${[...keys]}::text[])
      and m.deleted_at is null and m.archived_at is null`,
});

const setChatAs = statement<
  { userId: string; spaceId: string; channelKey: string; memberId: string; now: number },
  never
>({
  name: 'messaging_chat_as_set',
  area: AREA,
  variants: {
    'a choice': { userId: EXAMPLE_UUID, spaceId: EXAMPLE_UUID, channelKey: '', memberId: EXAMPLE_UUID, now: 0 },
  },
  build: ({ userId, spaceId, channelKey, memberId, now }) => sql`insert into messaging_chat_as
    (user_id, space_id, channel_key, member_id, updated_at)
    values (${userId}, ${spaceId}, ${channelKey}, ${memberId}, ${now})
    on conflict (user_id, space_id, channel_key) do update set member_id = excluded.member_id, updated_at = excluded.updated_at`,
});

export const preferencesRepo = {
  upsert: async (db: Knex, userId: string, now: number, changes: PreferenceChanges) =>
    void (await upsert(db, { userId, now, changes })),
  settings: async (db: Knex, userId: string) => (await settings(db, { userId }))[0] ?? null,
  lastViewed: async (db: Knex, userId: string) => (await lastViewed(db, { userId }))[0] ?? null,
  async channelOfSpace(db: Knex, userId: string, spaceId: string, channelId: string): Promise<boolean> {
    return (await channelOfSpace(db, { userId, spaceId, channelId })).length > 0;
  },
  chatAs: (db: Knex, userId: string, spaceId: string, keys: readonly string[]) => chatAs(db, { userId, spaceId, keys }),
  setChatAs: async (db: Knex, userId: string, spaceId: string, channelKey: string, memberId: string, now: number) =>
    void (await setChatAs(db, { userId, spaceId, channelKey, memberId, now })),
};
