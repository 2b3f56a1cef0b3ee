/**
 * Poll widgets (docs/social.md): one ballot per account per poll (primary key), replaced by each
 * vote in one statement, so concurrent votes of one account leave exactly one ballot. Counts are
 * computed from the ballots. A vote holds a share lock on the widget, so a concurrent options
 * change (widget PATCH, which remaps ballots under an update lock) applies before or after it.
 */
import type { Knex } from 'knex';
import type { components } from '../../../generated/api.d.ts';
import {
  inTransaction,
  oneStatement,
  ownerOf,
  readsAnswerAhead,
  type ServiceContext,
  StaleAnswer,
} from '../../core/context.ts';
import { badRequest, notFound } from '../../core/errors.ts';
import { pollRepo } from './repo/poll.ts';
import type { WidgetRow } from './repo/widgets.ts';
import { actorOf, requireWidget } from './widgets.ts';

type Schemas = components['schemas'];
type PollConfig = Schemas['PollWidgetConfig'];

const POLL_NOT_FOUND = 'Poll not found';

/** The poll's state from its config and counts. */
function toState(
  config: PollConfig,
  counts: ReadonlyArray<{ i: number; n: number }>,
  voters: number,
  mine: number[] | undefined,
): Schemas['PollState'] {
  const optionCounts = config.options.map(() => 0);
  for (const { i, n } of counts) if (i < optionCounts.length) optionCounts[i] = Number(n);
  return {
    question: config.question,
    options: config.options,
    allowMultipleSelections: config.allowMultipleSelections ?? false,
    optionCounts,
    distinctVoterCount: voters,
    myOptionIndices: mine ?? [],
  };
}

async function stateOf(db: Knex, widget: WidgetRow, voterId: string): Promise<Schemas['PollState']> {
  const { counts, voters, mine } = await pollRepo.state(db, widget.id, voterId);
  return toState(widget.config as PollConfig, counts, voters, mine);
}

/** Throws the 400 of the first rule the indices break on this poll (the rules castVote checks too). */
function checkBallot(config: PollConfig, indices: readonly number[]): void {
  if (new Set(indices).size !== indices.length) throw badRequest('optionIndices must not repeat an index');
  if (indices.some((i) => i >= config.options.length))
    throw badRequest('optionIndices must be below the number of options');
  if (!(config.allowMultipleSelections ?? false) && indices.length !== 1)
    throw badRequest('optionIndices must hold exactly one index on a single-choice poll');
}

export async function getState(
  ctx: ServiceContext,
  widgetId: string,
  notFoundMessage = POLL_NOT_FOUND,
): Promise<Schemas['PollState']> {
  const widget = await requireWidget(ctx, widgetId, 'poll', notFoundMessage);
  return stateOf(ctx.db, widget, actorOf(ctx));
}

/**
 * The answer of a keyed vote, built ahead (pollRepo.voteAhead): the other voters' counts with this
 * ballot; undefined when the poll is not found or the ballot breaks a rule (the vote refuses it).
 */
async function answerAhead(
  ctx: ServiceContext,
  vote: { widgetId: string; ownerId: string; voterId: string; indices: readonly number[]; sorted: readonly number[] },
): Promise<{ digest: string; state: Schemas['PollState'] } | undefined> {
  const read = await pollRepo.voteAhead(ctx.db, vote);
  if (read.config === null || read.digest === null) return undefined;
  const config = read.config as PollConfig;
  try {
    checkBallot(config, vote.indices);
  } catch {
    return undefined;
  }
  const counts = new Map(read.counts.map(({ i, n }) => [i, Number(n)]));
  for (const i of vote.sorted) counts.set(i, (counts.get(i) ?? 0) + 1);
  const voters = Number(read.voters) + (vote.sorted.length > 0 ? 1 : 0);
  const state = toState(
    config,
    [...counts].map(([i, n]) => ({ i, n })),
    voters,
    vote.sorted.length > 0 ? [...vote.sorted] : undefined,
  );
  return { digest: read.digest, state };
}

/** Replaces the acting account's ballot; [] on a multi-select poll removes it. */
export async function vote(
  ctx: ServiceContext,
  widgetId: string,
  input: Schemas['VotePollRequest'],
  notFoundMessage = POLL_NOT_FOUND,
): Promise<Schemas['PollState']> {
  const indices = [...input.optionIndices];
  const sorted = [...indices].sort((a, b) => a - b);
  // A ballot is secret: a friend's vote does not name the friend.
  const voted = { type: 'poll.voted', area: 'poll', data: { id: widgetId, widgetId }, anonymous: true } as const;
  // The owner's vote: one statement (pollRepo.vote). A friend's (visibility first) takes the
  // transaction, and so does a vote on a poll changed since the statement's snapshot (`fresh`).
  // A keyed vote (its key taken by its write) reads the poll and the other ballots first (its answer counts them),
  // and casts only if they are still so: else nothing is written and it runs again in a transaction.
  if (ctx.access.level === 'owner') {
    const voter = ownerOf(ctx);
    const vote = { widgetId, ownerId: voter, voterId: voter, indices, sorted, now: ctx.now };
    const ahead = readsAnswerAhead(ctx) ? await answerAhead(ctx, vote) : undefined;
    const events = ctx.events.rows(ctx, [voted]);
    const cast = await oneStatement(
      ctx,
      (db) => pollRepo.vote(db, vote, events, ahead?.digest ?? null),
      ahead && { body: ahead.state },
    );
    if (!cast.found) throw notFound(notFoundMessage);
    if (cast.fresh && cast.ahead_ok !== false) {
      const config = cast.config as PollConfig;
      if (!cast.ok) {
        checkBallot(config, indices);
        throw new Error(`poll ${widgetId}: the vote was refused for no rule of checkBallot`);
      }
      return ahead?.state ?? toState(config, cast.counts, cast.voters, sorted.length > 0 ? sorted : undefined);
    }
    if (ctx.keyed) throw new StaleAnswer();
  }
  return inTransaction(ctx, async (tx) => {
    const widget = await requireWidget(tx, widgetId, 'poll', notFoundMessage, 'share');
    checkBallot(widget.config as PollConfig, indices);
    const voter = actorOf(tx);
    if (sorted.length === 0) {
      await pollRepo.deleteBallot(tx.db, widgetId, voter);
    } else {
      await pollRepo.setBallot(tx.db, { widgetId, voterId: voter, ownerId: ownerOf(tx), indices: sorted }, tx.now);
    }
    await tx.events.emit(tx, voted);
    return stateOf(tx.db, widget, voter);
  });
}
