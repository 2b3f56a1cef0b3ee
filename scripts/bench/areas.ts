/**
 * The bench's friend and messaging data and scenarios (issues 13 and 14), on the full server only,
 * except the send (M3), which the independent baseline answers too (it has no friend or messaging
 * reads).
 *
 * Friends: a viewer account is an accepted friend of the large and the small account. Each owner
 * gives the viewer one custom bucket (every group open) and puts that bucket on 100 of its members:
 * the open front and tier presence (members 1–5) and members spread evenly over the rest; every
 * other member has no bucket, so the friend sees 100 of 10,000 (large) or 100 of 1,000 (small).
 * Friendship, bucket and assignments go through the API, so they are what the app writes.
 *
 * Messaging: the large account gets a space with 200 channels (bootstrap); one channel holds
 * `messages` messages, written through SQL with each row sealed by the server's cipher under the
 * run's key (AES-256-GCM with the account and message ids as associated data, as send writes them).
 * The send scenario writes to the 200 channels in turn (one account's messages spread over its
 * channels, not 32 writers queued on one channel's row).
 */
import { randomUUID } from 'node:crypto';
import type autocannon from 'autocannon';
import type { Knex } from 'knex';
import { parseMessageKeys } from '../../server/config.ts';
import { MessageCipher } from '../../server/crypto/messageCipher.ts';
import { benchMessageKeys } from './support.ts';
import type { SeededAccount } from './seed.ts';

/** How many of an owner's members the friend sees. */
export const FRIEND_VISIBLE_MEMBERS = 100;
/** Buckets the viewer does not hold, which take every member of the owner in turn. */
const OTHER_BUCKETS = 4;
const CHANNELS = 200;

export interface FriendSide {
  ownerId: string;
  ownerKey: string;
}

export interface AreaSeed {
  friendKey: string;
  large: FriendSide;
  small: FriendSide;
  messaging: {
    key: string;
    memberId: string;
    channelId: string;
    channelIds: string[];
    /** The message `depth` rows from the newest of the big channel: a deep page starts before it. */
    deep: { createdAt: number; id: string };
    messages: number;
  };
}

async function call<T>(url: string, key: string, method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(url + path, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`bench setup: ${method} ${path} answered ${res.status}: ${text}`);
  return (text ? JSON.parse(text) : undefined) as T;
}

/** Befriends the viewer and the owner and opens one bucket on FRIEND_VISIBLE_MEMBERS members. */
export async function shareWithFriend(
  url: string,
  knex: Knex,
  owner: SeededAccount,
  viewer: SeededAccount,
): Promise<void> {
  await call(url, viewer.apiKey, 'POST', `/api/v1/friends/${owner.userId}/request`);
  await call(url, owner.apiKey, 'POST', `/api/v1/friends/requests/${viewer.userId}/accept`);
  const bucket = await call<{ _id: string }>(url, owner.apiKey, 'POST', '/api/v1/privacy-buckets', {
    name: 'Bench friends',
  });
  await call(url, owner.apiKey, 'POST', '/api/v1/privacy-buckets/bulk/friends', {
    bucketId: bucket._id,
    mode: 'add',
    friendUserIds: [viewer.userId],
  });
  const total = Number(
    (await knex('members').where({ user_id: owner.userId }).whereNull('deleted_at').count({ n: '*' }).first())!.n,
  );
  const ordered = knex('members')
    .where({ user_id: owner.userId })
    .whereNull('deleted_at')
    .orderBy([{ column: 'created_at' }, { column: 'id' }]);
  // Members 1–5 hold the open front and the tier presence; the rest are spread evenly.
  const front: string[] = await ordered.clone().limit(5).pluck('id');
  const step = Math.max(1, Math.floor(total / FRIEND_VISIBLE_MEMBERS));
  const spread: string[] = await knex
    .from(ordered.clone().select('id', knex.raw('row_number() over (order by created_at, id) as rn')).as('o'))
    .whereRaw('rn > 5 and rn % ? = 0', [step])
    .orderBy('rn')
    .limit(FRIEND_VISIBLE_MEMBERS - front.length)
    .pluck('id');
  const ids = [...front, ...spread];
  for (let i = 0; i < ids.length; i += 250) {
    await call(url, owner.apiKey, 'POST', '/api/v1/privacy-buckets/bulk/members', {
      bucketId: bucket._id,
      mode: 'add',
      memberIds: ids.slice(i, i + 250),
    });
  }
  // An owner who shares through buckets has every member in one (a member in none is seen by no
  // friend): OTHER_BUCKETS buckets the viewer does not hold take all the members in turn, so the
  // assignments table is not the friend's 100 rows alone.
  const others: string[] = [];
  for (let i = 1; i <= OTHER_BUCKETS; i++)
    others.push(
      (
        await call<{ _id: string }>(url, owner.apiKey, 'POST', '/api/v1/privacy-buckets', {
          name: `Bench private ${i}`,
        })
      )._id,
    );
  await knex.raw(
    `insert into privacy_bucket_assignments (user_id, bucket_id, kind, content_id, created_at)
     select m.user_id, (?::uuid[])[1 + (row_number() over (order by m.created_at, m.id)) % ?], 'member', m.id, m.created_at
     from members m where m.user_id = ? and m.deleted_at is null`,
    [others, OTHER_BUCKETS, owner.userId],
  );
  await knex.raw('analyze privacy_bucket_assignments');
}

/** The big channel's messages, sealed like send seals them, in batches of one statement each. */
async function fillChannel(
  knex: Knex,
  userId: string,
  channelId: string,
  memberId: string,
  count: number,
  now: number,
): Promise<void> {
  const cipher = new MessageCipher(parseMessageKeys(benchMessageKeys));
  const BATCH = 10_000;
  const t0 = now - count * 1_000;
  for (let from = 0; from < count; from += BATCH) {
    const ids: string[] = [];
    const data: Buffer[] = [];
    const n = Math.min(BATCH, count - from);
    for (let i = 0; i < n; i++) {
      const id = randomUUID();
      ids.push(id);
      data.push(cipher.seal(userId, id, `Message ${from + i}: see you at the usual place, bring the notes.`).data);
    }
    await knex.raw(
      `insert into messaging_messages (id, user_id, channel_id, seq, author_member_id, key_id, content_enc, created_at)
       select x.id, ?::uuid, ?::uuid, ?::bigint + x.n, ?::uuid, ?, x.enc, ?::bigint + (?::bigint + x.n) * 1000
       from unnest(?::uuid[], ?::bytea[]) with ordinality as x(id, enc, n)`,
      [userId, channelId, from, memberId, cipher.primaryKeyId, t0, from, ids, data],
    );
  }
  await knex('messaging_channels')
    .where({ id: channelId })
    .update({ last_seq: count, read_seq: count, unread_count: 0 });
}

/** The owner's space of CHANNELS channels, `messages` of them in the first; `depth` names the deep page's start. */
export async function seedMessaging(
  url: string,
  knex: Knex,
  owner: SeededAccount,
  messages: number,
  depth: number,
): Promise<AreaSeed['messaging']> {
  const space = await call<{ id: string }>(url, owner.apiKey, 'POST', '/api/v1/messaging/spaces', {
    name: 'Bench space',
  });
  const channelIds: string[] = [];
  for (let i = 0; i < CHANNELS; i++) {
    channelIds.push(
      (
        await call<{ id: string }>(url, owner.apiKey, 'POST', `/api/v1/messaging/spaces/${space.id}/channels`, {
          name: `channel-${i}`,
        })
      ).id,
    );
  }
  const memberId = owner.frontPool[0]!;
  const channelId = channelIds[0]!;
  await fillChannel(knex, owner.userId, channelId, memberId, messages, Date.now() - 3_600_000);
  // A few messages in every other channel, unread, so bootstrap has counts to report.
  for (const id of channelIds.slice(1)) {
    await call(url, owner.apiKey, 'POST', `/api/v1/messaging/channels/${id}/messages`, { memberId, content: 'hello' });
  }
  await knex.raw('analyze messaging_messages');
  await knex.raw('analyze messaging_channels');
  const row = await knex('messaging_messages')
    .where({ channel_id: channelId })
    .whereNull('deleted_at')
    .orderBy([
      { column: 'created_at', order: 'desc' },
      { column: 'id', order: 'desc' },
    ])
    .offset(depth - 1)
    .first('created_at', 'id');
  return {
    key: owner.apiKey,
    memberId,
    channelId,
    channelIds,
    deep: { createdAt: Number(row.created_at), id: row.id },
    messages,
  };
}

/** Friend and messaging data on a running full server (`url`), after the main seed. */
export async function seedAreas(
  url: string,
  knex: Knex,
  seeded: { large: SeededAccount; small: SeededAccount; viewer: SeededAccount },
  plan: { messages: number; depth: number },
  log: (m: string) => void,
): Promise<AreaSeed> {
  const started = Date.now();
  await shareWithFriend(url, knex, seeded.large, seeded.viewer);
  await shareWithFriend(url, knex, seeded.small, seeded.viewer);
  log(`friends: the viewer sees ${FRIEND_VISIBLE_MEMBERS} members of the large and of the small account`);
  const messaging = await seedMessaging(url, knex, seeded.large, plan.messages, plan.depth);
  log(
    `messaging: ${CHANNELS} channels, ${plan.messages.toLocaleString('en')} messages in one, in ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
  return {
    friendKey: seeded.viewer.apiKey,
    large: { ownerId: seeded.large.userId, ownerKey: seeded.large.apiKey },
    small: { ownerId: seeded.small.userId, ownerKey: seeded.small.apiKey },
    messaging,
  };
}

/** A scenario as run.ts measures it, with the key it runs under. */
export interface AreaScenario {
  id: string;
  title: string;
  method?: 'POST';
  path: string;
  requests?: autocannon.Request[];
  key: string;
}

/**
 * The friend reads (as the viewer, of the large account; `s` suffix: of the small one), the owner's
 * messaging reads and the send. `deepHistory` is the owner's session about 10,000 deep (the owner's
 * deep page starts there; the friend's deep page starts at the same place).
 */
export function areaScenarios(a: AreaSeed, deepHistory: { startedAt: number; id: string }): AreaScenario[] {
  const friend = (side: FriendSide) => `/api/v1/friends/${side.ownerId}`;
  const m = a.messaging;
  let turn = 0;
  return [
    {
      id: 'F1',
      title: 'friend GET /friends/{id}/members (100 visible of 10,000)',
      path: `${friend(a.large)}/members`,
      key: a.friendKey,
    },
    {
      id: 'F1s',
      title: 'friend GET /friends/{id}/members (100 visible of 1,000)',
      path: `${friend(a.small)}/members`,
      key: a.friendKey,
    },
    { id: 'F2', title: 'friend GET /friends/{id}/front', path: `${friend(a.large)}/front`, key: a.friendKey },
    {
      id: 'F3a',
      title: 'friend GET /friends/{id}/front/history?limit=50 (first page)',
      path: `${friend(a.large)}/front/history?limit=50`,
      key: a.friendKey,
    },
    {
      id: 'F3as',
      title: 'friend GET /friends/{id}/front/history?limit=50 (small account)',
      path: `${friend(a.small)}/front/history?limit=50`,
      key: a.friendKey,
    },
    {
      id: 'F3b',
      title: 'friend GET /friends/{id}/front/history?limit=50 (after the owner’s ≈10,000th session)',
      path: `${friend(a.large)}/front/history?limit=50&cursorStartedAt=${deepHistory.startedAt}&cursorId=${deepHistory.id}`,
      key: a.friendKey,
    },
    {
      id: 'F4',
      title: 'friend GET /friends/{id}/entries?limit=50',
      path: `${friend(a.large)}/entries?limit=50`,
      key: a.friendKey,
    },
    {
      id: 'F4s',
      title: 'friend GET /friends/{id}/entries?limit=50 (small account)',
      path: `${friend(a.small)}/entries?limit=50`,
      key: a.friendKey,
    },
    {
      id: 'M1',
      title: 'GET /api/v1/messaging/bootstrap (200 channels)',
      path: '/api/v1/messaging/bootstrap',
      key: m.key,
    },
    {
      id: 'M2a',
      title: `GET /messaging/channels/{id}/messages?limit=50 (first page of ${m.messages.toLocaleString('en')})`,
      path: `/api/v1/messaging/channels/${m.channelId}/messages?limit=50`,
      key: m.key,
    },
    {
      id: 'M2b',
      title: 'GET /messaging/channels/{id}/messages?limit=50 (deep page)',
      path: `/api/v1/messaging/channels/${m.channelId}/messages?limit=50&beforeCreatedAt=${m.deep.createdAt}&beforeId=${m.deep.id}`,
      key: m.key,
    },
    {
      id: 'M3',
      title: 'POST /messaging/channels/{id}/messages (the 200 channels in turn)',
      method: 'POST',
      path: `/api/v1/messaging/channels/${m.channelIds[0]}/messages`,
      key: m.key,
      requests: [
        {
          method: 'POST',
          setupRequest: (req) => ({
            ...req,
            path: `/api/v1/messaging/channels/${m.channelIds[turn++ % m.channelIds.length]}/messages`,
            body: JSON.stringify({ memberId: m.memberId, content: 'Written by the bench: see you at six.' }),
          }),
        },
      ],
    },
  ];
}
