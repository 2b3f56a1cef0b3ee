/** The SQL of poll ballots (poll_ballots, migration 0014): one ballot per voter per poll widget. */
import type { Knex } from 'knex';
import { sql } from '../../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../../db/statements.ts';
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

export const pollRepo = {
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
