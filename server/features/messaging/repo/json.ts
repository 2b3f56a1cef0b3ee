/**
 * What the message reads of messaging share: the JSON projections of a message row's parts (its
 * mentions, attachments and link previews, each a lateral subquery over the message `m`), and the
 * reading of json values as pg gives them.
 */
import { sql } from '../../../db/sql.ts';

/** json / jsonb values arrive parsed from pg and as text from some drivers. */
export function jsonValue<T>(value: unknown): T | undefined {
  if (value === null || value === undefined) return undefined;
  return (typeof value === 'string' ? JSON.parse(value) : value) as T;
}

/** The message's mentions (`mm.mentions`): live members of the account, in the order the text names them. */
export const MENTIONS_JSON = sql`left join lateral (
     select coalesce(json_agg(json_build_object('memberId', mb.id, 'name', mb.name, 'displayName', coalesce(mb.display_name, '')) order by u.ord), '[]'::json) as mentions
     from unnest(m.mention_member_ids) with ordinality as u(member_id, ord)
     join members mb on mb.id = u.member_id and mb.user_id = m.user_id and mb.deleted_at is null
   ) mm on true`;

/** The message's attachments (`att.attachments`) in order, by `messaging_attachments_message`. */
export const ATTACHMENTS_JSON = sql`left join lateral (
     select coalesce(json_agg(json_build_object('id', f.id, 'fileName', f.file_name, 'contentType', f.content_type, 'byteSize', f.byte_size,
       'width', f.width, 'height', f.height, 'durationMs', f.duration_ms) order by f.position), '[]'::json) as attachments
     from messaging_attachments f where f.message_id = m.id
   ) att on true`;

/**
 * The message's ready, undismissed link previews (`lp.link_previews`) in order, by
 * `messaging_link_previews_message`: sealed content as base64 and the image's object key.
 */
export const LINK_PREVIEWS_JSON = sql`left join lateral (
     select coalesce(json_agg(json_build_object('id', pv.id, 'keyId', pv.key_id, 'data', encode(pv.data_enc, 'base64'),
       'imageKey', pv.image_key) order by pv.position), '[]'::json) as link_previews
     from messaging_link_previews pv where pv.message_id = m.id and pv.status = 'ready' and pv.dismissed_at is null
   ) lp on true`;
