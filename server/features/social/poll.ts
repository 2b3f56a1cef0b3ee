/**
 * Poll widgets (docs/social.md): one ballot per account per poll (primary key), replaced by each
 * vote in one statement, so concurrent votes of one account leave exactly one ballot. Counts are
 * computed from the ballots. A vote holds a share lock on the widget, so a concurrent options
 * change (widget PATCH, which remaps ballots under an update lock) applies before or after it.
 */
import type { Knex } from 'knex';
import type { components } from '../../../generated/api.d.ts';
import { inTransaction, ownerOf, type ServiceContext } from '../../core/context.ts';
import { badRequest } from '../../core/errors.ts';
import { pollRepo } from './repo/poll.ts';
import type { WidgetRow } from './repo/widgets.ts';
import { actorOf, requireWidget } from './widgets.ts';

type Schemas = components['schemas'];
type PollConfig = Schemas['PollWidgetConfig'];

const POLL_NOT_FOUND = 'Poll not found';

async function stateOf(db: Knex, widget: WidgetRow, voterId: string): Promise<Schemas['PollState']> {
  const config = widget.config as PollConfig;
  const { counts, voters, mine } = await pollRepo.state(db, widget.id, voterId);
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

export async function getState(
  ctx: ServiceContext,
  widgetId: string,
  notFoundMessage = POLL_NOT_FOUND,
): Promise<Schemas['PollState']> {
  const widget = await requireWidget(ctx, widgetId, 'poll', notFoundMessage);
  return stateOf(ctx.db, widget, actorOf(ctx));
}

/** Replaces the acting account's ballot; [] on a multi-select poll removes it. */
export async function vote(
  ctx: ServiceContext,
  widgetId: string,
  input: Schemas['VotePollRequest'],
  notFoundMessage = POLL_NOT_FOUND,
): Promise<Schemas['PollState']> {
  return inTransaction(ctx, async (tx) => {
    const widget = await requireWidget(tx, widgetId, 'poll', notFoundMessage, 'share');
    const config = widget.config as PollConfig;
    const indices = [...input.optionIndices];
    if (new Set(indices).size !== indices.length) throw badRequest('optionIndices must not repeat an index');
    if (indices.some((i) => i >= config.options.length))
      throw badRequest('optionIndices must be below the number of options');
    if (!(config.allowMultipleSelections ?? false) && indices.length !== 1)
      throw badRequest('optionIndices must hold exactly one index on a single-choice poll');
    const voter = actorOf(tx);
    if (indices.length === 0) {
      await pollRepo.deleteBallot(tx.db, widgetId, voter);
    } else {
      indices.sort((a, b) => a - b);
      await pollRepo.setBallot(tx.db, { widgetId, voterId: voter, ownerId: ownerOf(tx), indices }, tx.now);
    }
    // A ballot is secret: a friend's vote does not name the friend.
    await tx.events.emit(tx, { type: 'poll.voted', area: 'poll', data: { id: widgetId, widgetId }, anonymous: true });
    return stateOf(tx.db, widget, voter);
  });
}
