import type { Knex } from 'knex';
import { execScript } from '../sql.ts';

export const name = '0015_messaging_media';

/**
 * Messaging media (docs/messaging.md, "Attachments" and "Space icons").
 *
 * - messaging_attachments: the files of a message, in the order the send listed them. The bytes
 *   live in object storage under `object_key` (`u/<account>/messaging/attachments/<id>`), moved
 *   there from the staging area when the message was sent. Read with the message pages through
 *   `messaging_attachments_message` (one lateral probe per message).
 * - messaging_spaces.icon_key: the object key of the space's icon (null: none).
 * - messaging_messages.gif: the GIF sent with a message (the normalised shape of the GIF routes), or null.
 */
export async function up(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    create table messaging_attachments (
      id uuid primary key,
      user_id uuid not null references accounts (id) on delete cascade,
      message_id uuid not null references messaging_messages (id) on delete cascade,
      position integer not null,
      object_key text not null,
      file_name text not null,
      content_type text not null,
      byte_size bigint not null,
      width integer,
      height integer,
      duration_ms bigint,
      created_at bigint not null
    );
    create index messaging_attachments_message on messaging_attachments (message_id, position);
    create index messaging_attachments_owner on messaging_attachments (user_id, id);
    alter table messaging_spaces add column icon_key text;
    alter table messaging_messages add column gif jsonb;
  `,
  );
}

export async function down(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    alter table messaging_messages drop column gif;
    alter table messaging_spaces drop column icon_key;
    drop table messaging_attachments;
  `,
  );
}
