import type { Knex } from 'knex';
import { execScript } from '../sql.ts';

export const name = '0017_link_previews';

/**
 * Link previews of messages (docs/messaging.md, "Link previews").
 *
 * One row per distinct http(s) link of a message (at most 5), in the order the text names them
 * (`position`). A send or edit inserts the row `pending` and queues its fetch on the durable job
 * queue; the job sets it `ready` (with what the page says about itself, and the object key of its
 * re-hosted image under `u/<account>/messaging/link-previews/<id>`) or `failed` (`failure` says why,
 * for operators; failed previews are not shown). `dismissed_at` hides a preview from reads.
 * Message pages read the ready, undismissed previews of each message through
 * `messaging_link_previews_message` (one lateral probe per message, in the page's statement).
 * Account deletion removes the rows by cascade (and the images with `u/<account>/`).
 */
export async function up(knex: Knex): Promise<void> {
  await execScript(knex, `
    create table messaging_link_previews (
      id uuid primary key,
      user_id uuid not null references accounts (id) on delete cascade,
      message_id uuid not null references messaging_messages (id) on delete cascade,
      position integer not null,
      url text not null,
      status text not null check (status in ('pending', 'ready', 'failed')),
      failure text,
      title text,
      description text,
      site_name text,
      image_key text,
      fetched_at bigint,
      dismissed_at bigint,
      created_at bigint not null,
      updated_at bigint not null
    );
    create index messaging_link_previews_message on messaging_link_previews (message_id, position);
    create unique index messaging_link_previews_url on messaging_link_previews (message_id, url);
    create index messaging_link_previews_owner on messaging_link_previews (user_id);
  `);
}

export async function down(knex: Knex): Promise<void> {
  await execScript(knex, `drop table messaging_link_previews`);
}
