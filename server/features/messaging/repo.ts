/**
 * The hot reads of messaging as one statement each (docs/data-access.md): bootstrap, message
 * pages (older, newer, up to an anchor) and pins. Each is a named prepared statement with constant
 * text; the page walks `messaging_messages_page` (channel_id, created_at, id) among live rows, so
 * a page deep in a channel costs what the first does.
 */
import { prepared } from '../../db/prepared.ts';

/** json / jsonb values arrive parsed from pg and as text from some drivers. */
export function jsonValue<T>(value: unknown): T | undefined {
  if (value === null || value === undefined) return undefined;
  return (typeof value === 'string' ? JSON.parse(value) : value) as T;
}

interface BootstrapRow {
  spaces: unknown;
  categories: unknown;
  channels: unknown;
  last_space_id: string | null;
  last_channel_id: string | null;
}

/** Live spaces, their categories, their live channels (with unread counts) and the last viewed route, by index. */
export const bootstrapStatement = prepared<BootstrapRow>(
  'messaging_bootstrap',
  `select
     (select coalesce(json_agg(json_build_object('id', s.id, 'name', s.name, 'description', s.description, 'iconKey', s.icon_key,
        'sideSystemId', s.side_system_id, 'position', s.position, 'createdAt', s.created_at, 'updatedAt', s.updated_at)
        order by s.position, s.id), '[]'::json)
      from messaging_spaces s where s.user_id = ? and s.archived_at is null) as spaces,
     (select coalesce(json_agg(json_build_object('id', c.id, 'spaceId', c.space_id, 'name', c.name, 'collapsed', c.collapsed,
        'position', c.position, 'createdAt', c.created_at, 'updatedAt', c.updated_at)
        order by s.position, s.id, c.position, c.id), '[]'::json)
      from messaging_spaces s join messaging_categories c on c.user_id = s.user_id and c.space_id = s.id
      where s.user_id = ? and s.archived_at is null) as categories,
     (select coalesce(json_agg(json_build_object('id', c.id, 'spaceId', c.space_id, 'categoryId', c.category_id, 'name', c.name,
        'topic', c.topic, 'channelType', c.channel_type, 'position', c.position, 'createdAt', c.created_at, 'updatedAt', c.updated_at,
        'unread', c.unread_count)
        order by s.position, s.id, c.position, c.id), '[]'::json)
      from messaging_spaces s join messaging_channels c on c.user_id = s.user_id and c.space_id = s.id and c.archived_at is null
      where s.user_id = ? and s.archived_at is null) as channels,
     ls.id as last_space_id,
     lc.id as last_channel_id
   from (select ?::uuid as user_id) a
   left join messaging_preferences p on p.user_id = a.user_id
   left join messaging_spaces ls on ls.id = p.last_space_id and ls.user_id = a.user_id and ls.archived_at is null
   left join lateral (
     select c.id from messaging_channels c join messaging_spaces cs on cs.id = c.space_id and cs.archived_at is null
     where c.id = p.last_channel_id and c.user_id = a.user_id and c.archived_at is null limit 1
   ) lc on true`,
);

/** A message row as the pages read it: the message, its author's avatar, its reply parent and its mentions. */
export interface MessageReadRow {
  channel_found: string;
  pinned_ids: unknown;
  id: string | null;
  user_id: string;
  channel_id: string;
  author_member_id: string;
  key_id: string;
  content_enc: Uint8Array;
  created_at: number;
  edited_at: number | null;
  author_avatar: unknown;
  reply_id: string | null;
  reply_author_id: string | null;
  reply_key_id: string | null;
  reply_content_enc: Uint8Array | null;
  reply_deleted_at: number | null;
  mentions: unknown;
  attachments: unknown;
  link_previews: unknown;
  gif: unknown;
}

const MESSAGE_COLUMNS =
  'x.id, x.user_id, x.channel_id, x.author_member_id, x.key_id, x.content_enc, x.created_at, x.edited_at, x.reply_to_id, x.mention_member_ids, x.gif';

/**
 * The channel (live, in a live space, the account's), its pins, then `inner` (a lateral subquery
 * over `messaging_messages x` that yields the messages) with what each message shows (author avatar,
 * reply parent, mentions, attachments by `messaging_attachments_message`, ready and undismissed link
 * previews by `messaging_link_previews_message`), probed per row.
 * A channel with no matching message still yields one row (id null), so "empty" and "404" differ.
 */
function channelMessages(inner: string, order: string): string {
  return `select c.id as channel_found, pins.ids as pinned_ids,
     m.id, m.user_id, m.channel_id, m.author_member_id, m.key_id, m.content_enc, m.created_at, m.edited_at, m.gif,
     a.avatar as author_avatar,
     r.id as reply_id, r.author_member_id as reply_author_id, r.key_id as reply_key_id, r.content_enc as reply_content_enc, r.deleted_at as reply_deleted_at,
     mm.mentions, att.attachments, lp.link_previews
   from messaging_channels c
   join messaging_spaces s on s.id = c.space_id and s.archived_at is null
   cross join lateral (
     select coalesce(json_agg(p.message_id order by p.pinned_at desc, p.message_id), '[]'::json) as ids
     from messaging_pins p where p.channel_id = c.id
   ) pins
   left join lateral (${inner}) m on true
   left join lateral (select am.avatar from members am where am.id = m.author_member_id and am.user_id = m.user_id limit 1) a on true
   left join lateral (
     select pm.id, pm.author_member_id, pm.key_id, pm.content_enc, pm.deleted_at from messaging_messages pm
     where pm.id = m.reply_to_id and pm.user_id = m.user_id limit 1
   ) r on true
   left join lateral (
     select coalesce(json_agg(json_build_object('memberId', mb.id, 'name', mb.name, 'displayName', coalesce(mb.display_name, '')) order by u.ord), '[]'::json) as mentions
     from unnest(m.mention_member_ids) with ordinality as u(member_id, ord)
     join members mb on mb.id = u.member_id and mb.user_id = m.user_id and mb.deleted_at is null
   ) mm on true
   left join lateral (
     select coalesce(json_agg(json_build_object('id', f.id, 'fileName', f.file_name, 'contentType', f.content_type, 'byteSize', f.byte_size,
       'width', f.width, 'height', f.height, 'durationMs', f.duration_ms) order by f.position), '[]'::json) as attachments
     from messaging_attachments f where f.message_id = m.id
   ) att on true
   left join lateral (
     select coalesce(json_agg(json_build_object('id', pv.id, 'keyId', pv.key_id, 'data', encode(pv.data_enc, 'base64'),
       'imageKey', pv.image_key) order by pv.position), '[]'::json) as link_previews
     from messaging_link_previews pv where pv.message_id = m.id and pv.status = 'ready' and pv.dismissed_at is null
   ) lp on true
   where c.id = ? and c.user_id = ? and c.archived_at is null
   order by ${order}`;
}

const olderThan = (cursor: string, op: '<' | '<=') =>
  `select ${MESSAGE_COLUMNS} from messaging_messages x
   where x.channel_id = c.id and x.deleted_at is null${cursor ? ` and (x.created_at, x.id) ${op} (?::bigint, ?::uuid)` : ''}
   order by x.created_at desc, x.id desc limit ?`;

/** Newest first: [limit, channelId, userId]. */
export const pageFirst = prepared<MessageReadRow>(
  'messaging_page_first',
  channelMessages(olderThan('', '<'), 'm.created_at desc, m.id desc'),
);
/** Older than the key: [createdAt, id, limit, channelId, userId]. */
export const pageBefore = prepared<MessageReadRow>(
  'messaging_page_before',
  channelMessages(olderThan('cursor', '<'), 'm.created_at desc, m.id desc'),
);
/** The key itself and older: [createdAt, id, limit, channelId, userId]. */
export const pageUpTo = prepared<MessageReadRow>(
  'messaging_page_up_to',
  channelMessages(olderThan('cursor', '<='), 'm.created_at desc, m.id desc'),
);
/** The oldest messages newer than the key, oldest first: [createdAt, id, limit, channelId, userId]. */
export const pageAfter = prepared<MessageReadRow>(
  'messaging_page_after',
  channelMessages(
    `select ${MESSAGE_COLUMNS} from messaging_messages x
     where x.channel_id = c.id and x.deleted_at is null and (x.created_at, x.id) > (?::bigint, ?::uuid)
     order by x.created_at, x.id limit ?`,
    'm.created_at, m.id',
  ),
);
/** One live message of the channel: [messageId, channelId, userId]. */
export const oneMessage = prepared<MessageReadRow>(
  'messaging_message_one',
  channelMessages(
    `select ${MESSAGE_COLUMNS} from messaging_messages x where x.id = ? and x.channel_id = c.id and x.deleted_at is null`,
    'm.id',
  ),
);
/** Pinned live messages, most recently pinned first: [channelId, userId]. */
export const pinnedMessages = prepared<MessageReadRow>(
  'messaging_pins_list',
  channelMessages(
    `select ${MESSAGE_COLUMNS}, pn.pinned_at from messaging_pins pn join messaging_messages x on x.id = pn.message_id
     where pn.channel_id = c.id and x.deleted_at is null order by pn.pinned_at desc, pn.message_id limit 50`,
    'm.pinned_at desc, m.id',
  ),
);
