/** The SQL of poll ballots (poll_ballots, migration 0014): one ballot per voter per poll widget. */
import type { Knex } from 'knex';
import type { PendingEvent } from '../../../core/context.ts';
import { sql } from '../../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../../db/statements.ts';
import { appendEvents, EXAMPLE_EVENT, keyedExample, notifiedColumn } from '../../../events/log.ts';
import { AREA } from './shared.ts';

export interface BallotRow {
  voter_user_id: string;
  user_id: string;
  option_indices: number[];
}

/** The number of ballots that chose each option (options nobody chose are absent). */
const optionCounts = statement<{ widgetId: string }, { i: number; n: number }>({
  name: 'social_poll_option_counts',
  area: AREA,
  variants: { 'a poll': { widgetId: EXAMPLE_UUID } },
  build: ({ widgetId }) =>
    sql`select i, count(*)::int as n from poll_ballots, unnest(option_indices) as i where widget_id = ${widgetId} group by i`,
});

const voterCount = statement<{ widgetId: string }, { n: number }>({
  name: 'social_poll_voter_count',
  area: AREA,
  variants: { 'a poll': { widgetId: EXAMPLE_UUID } },
  build: ({ widgetId }) => sql`select count(*)::int as n from poll_ballots where widget_id = ${widgetId}`,
});

const ballotOf = statement<{ widgetId: string; voterId: string }, Pick<BallotRow, 'option_indices'>>({
  name: 'social_poll_ballot_of',
  area: AREA,
  variants: { 'a voter': { widgetId: EXAMPLE_UUID, voterId: EXAMPLE_UUID } },
  build: ({ widgetId, voterId }) =>
    sql`select option_indices from poll_ballots where widget_id = ${widgetId} and voter_user_id = ${voterId} limit 1`,
});

const deleteBallot = statement<{ widgetId: string; voterId: string }, never>({
  name: 'social_poll_ballot_delete',
  area: AREA,
  variants: { 'a voter': { widgetId: EXAMPLE_UUID, voterId: EXAMPLE_UUID } },
  build: ({ widgetId, voterId }) =>
    sql`delete from poll_ballots where widget_id = ${widgetId} and voter_user_id = ${voterId}`,
});

/** Sets the voter's ballot, replacing the one there was, in one statement. */
const upsertBallot = statement<
  { widgetId: string; voterId: string; ownerId: string; indices: readonly number[]; now: number },
  never
>({
  name: 'social_poll_ballot_upsert',
  area: AREA,
  variants: {
    'a voter': { widgetId: EXAMPLE_UUID, voterId: EXAMPLE_UUID, ownerId: EXAMPLE_UUID, indices: [0], now: 0 },
  },
  build: ({ widgetId, voterId, ownerId, indices, now }) => sql`insert into poll_ballots
      (widget_id, voter_user_id, user_id, option_indices, updated_at)
    values (${widgetId}, ${voterId}, ${ownerId}, ${[...indices]}::int[], ${now})
    on conflict (widget_id, voter_user_id) do update
      set option_indices = excluded.option_indices, updated_at = excluded.updated_at`,
});

const ballotsOfWidget = statement<{ widgetId: string }, BallotRow>({
  name: 'social_poll_ballots',
  area: AREA,
  variants: { 'a poll': { widgetId: EXAMPLE_UUID } },
  build: ({ widgetId }) =>
    sql`select voter_user_id, user_id, option_indices from poll_ballots where widget_id = ${widgetId}`,
});

const deleteBallotsOfWidget = statement<{ widgetId: string }, never>({
  name: 'social_poll_ballots_delete',
  area: AREA,
  variants: { 'a poll': { widgetId: EXAMPLE_UUID } },
  build: ({ widgetId }) => sql`delete from poll_ballots where widget_id = ${widgetId}`,
});

/** Inserts ballots of one widget, given as a JSON array of BallotRow (one text whatever their number). */
const insertBallots = statement<{ widgetId: string; ballots: string; now: number }, never>({
  name: 'social_poll_ballots_insert',
  area: AREA,
  variants: { 'some ballots': { widgetId: EXAMPLE_UUID, ballots: '[]', now: 0 } },
  build: ({ widgetId, ballots, now }) => sql`insert into poll_ballots
      (widget_id, voter_user_id, user_id, option_indices, updated_at)
    select ${widgetId}::uuid, b.voter_user_id, b.user_id,
      array(select e.i::int from jsonb_array_elements_text(b.option_indices) with ordinality as e(i, n) order by e.n),
      ${now}::bigint
    from jsonb_to_recordset(${ballots}::jsonb) as b(voter_user_id uuid, user_id uuid, option_indices jsonb)`,
});

/** A vote to cast in one statement: `indices` as given (the rules check them), `sorted` as stored. */
export interface NewVote {
  widgetId: string;
  ownerId: string;
  voterId: string;
  indices: readonly number[];
  sorted: readonly number[];
  now: number;
}

/** What the vote statement decided, and the poll's state after the vote when it was cast. */
export interface VoteVerdict {
  /** The owner's poll. */
  found: boolean;
  /** The poll is the version the statement's snapshot saw (no widget write committed since). */
  fresh: boolean;
  /** With `ahead`: the other voters' ballots were still those read ahead. */
  ahead_ok?: boolean;
  /** Cast: found, fresh (and `ahead_ok`) and the indices valid for the poll's options. */
  ok: boolean;
  /** The poll's config (as locked), when found. */
  config: Record<string, unknown> | null;
  counts: Array<{ i: number; n: number }>;
  voters: number;
}

const CAST = sql`(select ok from verdict)`;

/**
 * The digest of what a vote's answer shows beyond the vote, for a poll `p` (its config): the other
 * voters' ballots as counts per option and in all, in the statement's snapshot. Read ahead of a
 * keyed vote (voteAhead) and checked by the vote (castVote's `ahead`).
 */
const othersDigest = (v: Pick<NewVote, 'widgetId' | 'voterId'>) => sql`md5(row(p.config::text,
      (select coalesce(json_agg(json_build_object('i', c.i, 'n', c.n) order by c.i), '[]'::json)::text
        from (select i, count(*)::int as n from poll_ballots o, unnest(o.option_indices) as i
          where o.widget_id = ${v.widgetId} and o.voter_user_id <> ${v.voterId} group by i) c),
      (select count(*) from poll_ballots o where o.widget_id = ${v.widgetId} and o.voter_user_id <> ${v.voterId}))::text)`;

/** What a keyed vote reads ahead: the poll's config, the other voters' counts and their digest. */
export interface VoteAhead {
  config: Record<string, unknown> | null;
  counts: Array<{ i: number; n: number }>;
  voters: number;
  digest: string | null;
}

/** The poll and the other voters' ballots, read ahead of a keyed vote (its answer shows the counts). */
const voteAhead = statement<{ vote: Pick<NewVote, 'widgetId' | 'ownerId' | 'voterId'> }, VoteAhead>({
  name: 'social_poll_vote_ahead',
  area: AREA,
  variants: { 'a vote': { vote: { widgetId: EXAMPLE_UUID, ownerId: EXAMPLE_UUID, voterId: EXAMPLE_UUID } } },
  build: ({ vote: v }) => sql`with p as (
      select w.config from social_widgets w
      where w.id = ${v.widgetId} and w.user_id = ${v.ownerId} and w.type = 'poll'
    )
    select p.config,
      (select coalesce(json_agg(json_build_object('i', c.i, 'n', c.n)), '[]'::json)
        from (select i, count(*)::int as n from poll_ballots o, unnest(o.option_indices) as i
          where o.widget_id = ${v.widgetId} and o.voter_user_id <> ${v.voterId} group by i) c) as counts,
      (select count(*)::int from poll_ballots o where o.widget_id = ${v.widgetId} and o.voter_user_id <> ${v.voterId}) as voters,
      ${othersDigest(v)} as digest
    from (select 1) one left join p on true`,
});

/**
 * A vote and its event in one statement (docs/data-access.md, "Writes in one statement"): the
 * owner's poll share-locked (a widget PATCH, which remaps ballots under an update lock, applies
 * before or after), the indices checked against its options (distinct, each below their number,
 * exactly one on a single-choice poll), then the voter's ballot replaced (or removed by []) and
 * poll.voted. The counts are the snapshot's other ballots and this one, so the vote is cast only if
 * the poll is still the version the snapshot saw (its xmin): a widget write committed since may
 * have remapped the ballots, and `fresh` false sends the caller to its transaction.
 */
const castVote = statement<
  { vote: NewVote; events: readonly PendingEvent[]; ahead: string | null },
  VoteVerdict & { notified: unknown }
>({
  name: 'social_poll_vote',
  area: AREA,
  variants: {
    'a vote': {
      vote: { widgetId: EXAMPLE_UUID, ownerId: EXAMPLE_UUID, voterId: EXAMPLE_UUID, indices: [0], sorted: [0], now: 0 },
      events: [EXAMPLE_EVENT],
      ahead: null,
    },
    'a keyed vote whose answer was read ahead': {
      vote: { widgetId: EXAMPLE_UUID, ownerId: EXAMPLE_UUID, voterId: EXAMPLE_UUID, indices: [0], sorted: [0], now: 0 },
      events: keyedExample([EXAMPLE_EVENT]),
      ahead: 'x',
    },
  },
  build: ({ vote: v, events, ahead }) => sql`with poll as (
      select w.xmin as version, w.config from social_widgets w
      where w.id = ${v.widgetId} and w.user_id = ${v.ownerId} and w.type = 'poll'
      for share
    ),
    seen as (
      select w.xmin as version from social_widgets w
      where w.id = ${v.widgetId} and w.user_id = ${v.ownerId} and w.type = 'poll'
    ),
    verdict as (
      select p.config is not null as found, coalesce(p.version = s.version, false) as fresh,${
        ahead === null ? sql.empty : sql` coalesce(${othersDigest(v)} = ${ahead}::text, false) as ahead_ok,`
      }
        coalesce(p.version = s.version, false)${ahead === null ? sql.empty : sql` and coalesce(${othersDigest(v)} = ${ahead}::text, false)`}
          and (select count(distinct i) from unnest(${[...v.indices]}::int[]) i) = cardinality(${[...v.indices]}::int[])
          and not exists (select 1 from unnest(${[...v.indices]}::int[]) i where i >= jsonb_array_length(p.config -> 'options'))
          and (coalesce(p.config -> 'allowMultipleSelections' = 'true'::jsonb, false) or cardinality(${[...v.indices]}::int[]) = 1)
          as ok,
        p.config
      from (select 1) one left join poll p on true left join seen s on true
    ),
    removed as (
      delete from poll_ballots
      where widget_id = ${v.widgetId} and voter_user_id = ${v.voterId} and cardinality(${[...v.sorted]}::int[]) = 0 and ${CAST}
    ),
    ballot as (
      insert into poll_ballots (widget_id, voter_user_id, user_id, option_indices, updated_at)
      select ${v.widgetId}, ${v.voterId}, ${v.ownerId}, ${[...v.sorted]}::int[], ${v.now}
      from verdict where ok and cardinality(${[...v.sorted]}::int[]) > 0
      on conflict (widget_id, voter_user_id) do update
        set option_indices = excluded.option_indices, updated_at = excluded.updated_at
      returning option_indices
    ),
    ballots as (
      select b.option_indices from poll_ballots b where b.widget_id = ${v.widgetId} and b.voter_user_id <> ${v.voterId}
      union all
      select option_indices from ballot
    ),
    ${appendEvents(events, CAST)}
    select v.found, v.fresh,${ahead === null ? sql.empty : sql` v.ahead_ok,`} v.ok, v.config,
      case when v.ok then (select coalesce(json_agg(json_build_object('i', c.i, 'n', c.n)), '[]'::json)
        from (select i, count(*)::int as n from ballots, unnest(ballots.option_indices) as i group by i) c)
        else '[]'::json end as counts,
      case when v.ok then (select count(*)::int from ballots) else 0 end as voters,
      ${notifiedColumn}
    from verdict v`,
});

export const pollRepo = {
  /**
   * Casts the vote with its event in one statement, or writes nothing (see castVote); `ahead`: the
   * digest read ahead of a keyed vote (voteAhead), which the vote requires to hold. The verdict with
   * `notified` (a keyed vote's oneStatement reads it).
   */
  async vote(
    db: Knex,
    vote: NewVote,
    events: readonly PendingEvent[],
    ahead: string | null = null,
  ): Promise<VoteVerdict & { notified: unknown }> {
    return (await castVote(db, { vote, events, ahead }))[0]!;
  },
  voteAhead: async (db: Knex, vote: Pick<NewVote, 'widgetId' | 'ownerId' | 'voterId'>) =>
    (await voteAhead(db, { vote }))[0]!,
  /** The poll's counts: per option index (chosen ones only), and of ballots; and the voter's ballot. One round of three statements. */
  async state(
    db: Knex,
    widgetId: string,
    voterId: string,
  ): Promise<{ counts: Array<{ i: number; n: number }>; voters: number; mine: number[] | undefined }> {
    const [counts, [voters], [mine]] = await Promise.all([
      optionCounts(db, { widgetId }),
      voterCount(db, { widgetId }),
      ballotOf(db, { widgetId, voterId }),
    ]);
    return { counts, voters: voters?.n ?? 0, mine: mine?.option_indices };
  },
  async deleteBallot(db: Knex, widgetId: string, voterId: string): Promise<void> {
    await deleteBallot(db, { widgetId, voterId });
  },
  /** `indices` sorted, never empty. */
  async setBallot(
    db: Knex,
    ballot: { widgetId: string; voterId: string; ownerId: string; indices: readonly number[] },
    now: number,
  ): Promise<void> {
    await upsertBallot(db, { ...ballot, now });
  },
  ballots: (db: Knex, widgetId: string) => ballotsOfWidget(db, { widgetId }),
  async deleteBallots(db: Knex, widgetId: string): Promise<void> {
    await deleteBallotsOfWidget(db, { widgetId });
  },
  async insertBallots(db: Knex, widgetId: string, ballots: readonly BallotRow[], now: number): Promise<void> {
    await insertBallots(db, { widgetId, ballots: JSON.stringify(ballots), now });
  },
};
