/**
 * The SQL of messaging's media: the staged uploads the attachment and space-icon flows check, the
 * attachments a send takes in, and the object behind a readable attachment. Committed as
 * generated/sql/messaging.sql.
 */
import type { Knex } from 'knex';
import { sql } from '../../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../../db/statements.ts';

const AREA = 'messaging';

/** An unexpired staged upload of the account for `purpose`: its metadata. */
const staged = statement<{ userId: string; stagingId: string; purpose: string; now: number }, { metadata: unknown }>({
  name: 'messaging_staged_upload',
  area: AREA,
  variants: { 'a staged upload': { userId: EXAMPLE_UUID, stagingId: EXAMPLE_UUID, purpose: 'x', now: 0 } },
  build: ({ userId, stagingId, purpose, now }) => sql`select metadata from staged_uploads
    where id = ${stagingId} and user_id = ${userId} and purpose = ${purpose} and expires_at > ${now}
    limit 1`,
});

export interface NewAttachment {
  id: string;
  user_id: string;
  message_id: string;
  position: number;
  object_key: string;
  file_name: string;
  content_type: string;
  byte_size: number;
  width: number | null;
  height: number | null;
  duration_ms: number | null;
  created_at: number;
}

const insert = statement<{ row: NewAttachment }, never>({
  name: 'messaging_attachment_insert',
  area: AREA,
  variants: {
    'an attachment': {
      row: {
        id: EXAMPLE_UUID,
        user_id: EXAMPLE_UUID,
        message_id: EXAMPLE_UUID,
        position: 0,
        object_key: 'x',
        file_name: 'x',
        content_type: 'x',
        byte_size: 0,
        width: null,
        height: null,
        duration_ms: null,
        created_at: 0,
      },
    },
  },
  build: ({ row: r }) => sql`insert into messaging_attachments
    (id, user_id, message_id, position, object_key, file_name, content_type, byte_size, width, height, duration_ms, created_at)
    values (${r.id}, ${r.user_id}, ${r.message_id}, ${r.position}, ${r.object_key}, ${r.file_name}, ${r.content_type},
      ${r.byte_size}, ${r.width}, ${r.height}, ${r.duration_ms}, ${r.created_at})`,
});

/** The object of an attachment of the account on a live message in a live channel and space. */
const objectKey = statement<{ userId: string; attachmentId: string }, { object_key: string }>({
  name: 'messaging_attachment_object',
  area: AREA,
  variants: { 'an attachment': { userId: EXAMPLE_UUID, attachmentId: EXAMPLE_UUID } },
  build: ({ userId, attachmentId }) => sql`select f.object_key from messaging_attachments f
    join messaging_messages m on m.id = f.message_id
    join messaging_channels c on c.id = m.channel_id
    join messaging_spaces s on s.id = c.space_id
    where f.id = ${attachmentId} and f.user_id = ${userId}
      and m.deleted_at is null and c.archived_at is null and s.archived_at is null
    limit 1`,
});

export const attachmentsRepo = {
  findStaged: async (db: Knex, userId: string, stagingId: string, purpose: string, now: number) =>
    (await staged(db, { userId, stagingId, purpose, now }))[0] ?? null,
  insert: async (db: Knex, row: NewAttachment) => void (await insert(db, { row })),
  findObjectKey: async (db: Knex, userId: string, attachmentId: string) =>
    (await objectKey(db, { userId, attachmentId }))[0]?.object_key ?? null,
};
