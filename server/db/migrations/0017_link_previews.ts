import type { Knex } from 'knex';
import { execScript } from '../sql.ts';

export const name = '0017_link_previews';

/**
 * Link previews of messages (docs/messaging.md, "Link previews").
 *
 * One row per distinct http(s) link of a message (at most 5), in the order the text names them
 * (`position`). The link is part of the message's text, so it is stored like the text: `data_enc`
 * is the JSON `{ url, title, description, siteName }` sealed with the message keyring (AES-256-GCM,
 * `key_id`; the preview id is the bound row id), never in clear, and the re-encryption job rewrites
 * it after a key rotation. A send or edit inserts the row `pending` (url only) and queues its fetch
 * on the durable job queue; the job sets it `ready` (with what the page says about itself, and the
 * object key of its re-hosted image under `u/<account>/messaging/link-previews/<id>`) or `failed`
 * (`failure` says why, for operators: a reason code, never page content; failed previews are not
 * shown). `dismissed_at` hides a preview from reads.
 * Message pages read the ready, undismissed previews of each message through
 * `messaging_link_previews_message` (one lateral probe per message, in the page's statement).
 * Account deletion removes the rows by cascade (and the images with `u/<account>/`).
 */
export async function up(knex: Knex): Promise<void> {
  await execScript(
    knex,
    `
    create table messaging_link_previews (
      id uuid primary key,
      user_id uuid not null references accounts (id) on delete cascade,
      message_id uuid not null references messaging_messages (id) on delete cascade,
      position integer not null,
      key_id text not null,
      data_enc bytea not null,
      status text not null check (status in ('pending', 'ready', 'failed')),
      failure text,
      image_key text,
      fetched_at bigint,
      dismissed_at bigint,
      created_at bigint not null,
      updated_at bigint not null
    );
    create index messaging_link_previews_message on messaging_link_previews (message_id, position);
    create index messaging_link_previews_owner on messaging_link_previews (user_id);
    create index messaging_link_previews_key on messaging_link_previews (key_id);
  `,
  );
}

export async function down(knex: Knex): Promise<void> {
  await execScript(knex, `drop table messaging_link_previews`);
}
