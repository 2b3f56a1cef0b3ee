import type { Knex } from 'knex';

export const name = '0030_front_writes';

/**
 * Front writes in one statement (server/features/front/, docs/data-access.md "Writes in one
 * statement"):
 *
 * - `front_session_counts.next_position`: the position the account's next started session takes.
 *   The account's counter row is its front lock: every front write takes it first (the front's
 *   `front_lock` statement, or the start and stop statements' first CTE) and holds it to commit.
 *   A start takes its position from the row (`next_position + 1 … returning`), which PostgreSQL
 *   reads at its newest committed version even when the statement waited for it; a position read
 *   as `max(position) + 1` in the same statement would not see the session the writer it waited
 *   for had just committed.
 *
 * - `front_state(account)`: the account's front as GET /api/v1/front shows it (FrontState, the same
 *   values as getFront in server/features/front/service.ts builds in JS). A `front.changed` event
 *   is appended with `{"front": null}` and this deferred trigger fills it as the transaction
 *   commits, so the event holds the front as its transaction leaves it, even when that is one
 *   statement that cannot read, after the lock it waited for, what the writer before it committed.
 *   Front writers are serialised by the counter row to commit, so no other front change of the
 *   account can commit between the fill and the commit.
 */
// knex.raw binds each question mark: the media URL's own is escaped (\\?).
const statements = [
  `alter table front_session_counts add column next_position bigint not null default 0`,
  `update front_session_counts c set next_position = coalesce((
     select max(s.position) + 1 from front_sessions s
     where s.user_id = c.user_id and s.ended_at is null and s.deleted_at is null), 0)`,
  // Every session given a place (imports, corrections that reopen one, a friend's start) keeps
  // next_position past it, so a start never takes a place an open session holds.
  `create function front_sessions_placed() returns trigger language plpgsql as $$
   begin
     insert into front_session_counts as c (user_id, next_position)
       select p.user_id, max(p.position) + 1 from placed p where p.position is not null group by p.user_id
     on conflict (user_id) do update set next_position = excluded.next_position
       where c.next_position < excluded.next_position;
     return null;
   end $$`,
  `create trigger front_sessions_placed_insert after insert on front_sessions
     referencing new table as placed for each statement execute function front_sessions_placed()`,
  `create trigger front_sessions_placed_update after update on front_sessions
     referencing new table as placed for each statement execute function front_sessions_placed()`,
  `create function front_media_url(member_id uuid, kind text, ref jsonb) returns text language sql immutable as $$
     select case when ref is null then null else
       '/api/v1/members/' || member_id || '/media\\?kind=' || kind || '&v=' ||
       left(encode(sha256(convert_to(case when ref->>'source' = 'object' then ref->>'etag' else ref->>'url' end, 'UTF8')), 'hex'), 12)
     end
   $$`,
  `create function front_state(uid uuid) returns jsonb language sql stable as $$
     with sessions as (
       select s.id, s.member_id, s.started_at, s.note,
         jsonb_build_object(
           '_id', m.id, 'userId', uid, 'sideSystemId', m.side_system_id, 'subSystemId', m.sub_system_id,
           'directoryId', m.directory_id, 'name', m.name, 'displayName', coalesce(m.display_name, ''),
           'pronouns', coalesce(m.pronouns, ''), 'description', coalesce(m.description, ''),
           'avatarUrl', front_media_url(m.id, 'avatar', m.avatar),
           'backgroundUrl', front_media_url(m.id, 'banner', m.banner),
           'aboutTags', m.about_tags, 'profileStyle', m.profile_style, 'archivedAt', m.archived_at,
           'createdAt', m.created_at, 'updatedAt', m.updated_at, 'version', m.version) as member,
         row_number() over (order by s.position asc nulls last, s.started_at asc, s.id asc) as n
       from front_sessions s
       join members m on m.id = s.member_id and m.user_id = s.user_id and m.deleted_at is null
       where s.user_id = uid and s.ended_at is null and s.deleted_at is null
     ),
     presence as (
       select p.member_id, p.note, p.tier_key, p.created_at,
         case p.tier_key when 'coFront' then 'Co-front' when 'coConscious' then 'Co-conscious'
           else coalesce(t.display_name, p.tier_key) end as display_name
       from front_tier_presence p
       join members m on m.id = p.member_id and m.user_id = p.user_id and m.deleted_at is null
       left join front_custom_tiers t on t.user_id = p.user_id and t.id::text = p.tier_key
       where p.user_id = uid
     )
     select jsonb_build_object(
       'memberIds', coalesce((select jsonb_agg(member_id order by n) from sessions), '[]'),
       'members', coalesce((select jsonb_agg(member order by n) from sessions), '[]'),
       'activeSessions', coalesce((select jsonb_agg(
           jsonb_build_object('_id', id, 'userId', uid, 'memberId', member_id, 'startedAt', started_at)
             || case when note is null then '{}'::jsonb else jsonb_build_object('note', note) end
           order by n) from sessions), '[]'),
       'primaryMemberId', (select to_jsonb(member_id) from sessions where n = 1),
       'primaryNote', (select to_jsonb(note) from sessions where n = 1),
       'tieredPresence', coalesce((select jsonb_agg(
           jsonb_build_object('memberId', member_id, 'tierKey', tier_key, 'tierDisplayName', display_name, 'note', note)
           order by created_at, member_id) from presence), '[]'))
   $$`,
  `create function events_front_state() returns trigger language plpgsql as $$
   begin
     update events set data = jsonb_build_object('front', front_state(new.account_id)) where id = new.id;
     return null;
   end $$`,
  `create constraint trigger events_front_state after insert on events deferrable initially deferred
     for each row when (new.type = 'front.changed' and new.data = '{"front": null}'::jsonb)
     execute function events_front_state()`,
];

export async function up(knex: Knex): Promise<void> {
  for (const sql of statements) await knex.raw(sql);
}

export async function down(knex: Knex): Promise<void> {
  for (const sql of [
    'drop trigger events_front_state on events',
    'drop function events_front_state()',
    'drop function front_state(uuid)',
    'drop function front_media_url(uuid, text, jsonb)',
    'drop trigger front_sessions_placed_update on front_sessions',
    'drop trigger front_sessions_placed_insert on front_sessions',
    'drop function front_sessions_placed()',
    'alter table front_session_counts drop column next_position',
  ]) {
    await knex.raw(sql);
  }
}
